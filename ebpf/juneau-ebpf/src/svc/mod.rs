//! ClusterIP Services (kube-proxy-free): the first packet of a connection from a
//! consuming Pod to a Service's ClusterIP, port and protocol picks a backend (session
//! affinity, else the Service's Maglev table) and gets the connection's pair of
//! entries; it and every later packet of it leave with the backend as destination
//! ([`egress`], in the router before the route lookup, so the packet is routed to the
//! backend like any other). Replies are given the ClusterIP back as source where they
//! are delivered, on the client's Node ([`reverse`], from `hooks/deliver.rs`).
//!
//! A Pod reaching itself through a Service (hairpin) has its source translated to
//! `HAIRPIN_IP` so that its reply comes back through its gateway, where
//! [`open::hairpin_reply`] gives it the ClusterIP. An ICMP error quoting a translated packet
//! is given the Service back where it is delivered to the client (`error`). Left to
//! later stages: SCTP is translated only where the port stays the same (its CRC covers
//! the ports); errors of hairpin and Node-stack (SVC-02) connections. A fragmented
//! datagram is translated whole (`crate::frag`: its later fragments, addresses only),
//! except a hairpin's reply.
mod error;
mod host;
mod open;
mod reverse;

pub use host::to_host;
pub use reverse::reverse;

use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{
        CT_F_HAIRPIN, CT_F_PROVIDER, CT_F_REPLY, CT_F_SERVICE, CT_F_SNAT, CtEntry, CtKey,
        HAIRPIN_IP, PROTO_TCP, ZONE_HOST,
    },
};

use crate::{
    conntrack,
    ipv4::Ipv4,
    l4::{self, TCP_ACK, TCP_SYN},
    maps, xlate,
};

/// What the Service stage made of a packet.
pub enum Egress {
    /// Not to a Service: routed as it is.
    Pass,
    /// Translated: routed to the backend, the packet's new destination.
    Translated,
    /// To a Service without a backend that takes connections: rejected with ICMP port
    /// unreachable from the ClusterIP (as kube-proxy does).
    Reject,
    /// Translated both ways to a backend outside every Subnet (SVC-02): it leaves
    /// through the Node's stack ([`to_host`]).
    Host,
    /// Translated both ways to a provider Pod from another Vpc (SVC-02): routed by the
    /// provider's table (`SvcHost::provider_vni`).
    Provider,
    /// Not to a Service: another stage's connection, its entry found here once for
    /// every stage (the hook gives it to the NATGateway's fast path or to the
    /// sender's side of policy).
    Connection {
        entry: *mut CtEntry,
        ports: l4::Ports,
    },
}

/// Whether `vni` is the provider Vpc's `natSourceSubnet` segment, where every Node's
/// Service source address is (SVC-02).
#[inline(always)]
pub fn is_provider_segment(vni: u32) -> bool {
    vni != 0 && provider_vni() == vni
}

/// The provider Vpc's `natSourceSubnet` VNI (`jn_svc_host`), 0 while there is none.
#[inline(always)]
fn provider_vni() -> u32 {
    maps::jn_svc_host.get(0).map_or(0, |h| h.provider_vni)
}

/// The connection's backend, its entries made for a new one ([`open::open`]). `zone`: the
/// VNI of the client's segment; `other_vpc`: that segment is not in the provider Vpc,
/// whose Pods back the Services.
#[inline(always)]
pub fn egress(
    ctx: &TcContext,
    zone: u32,
    ip: &Ipv4,
    other_vpc: bool,
) -> Result<Egress, DropReason> {
    // A later fragment by its datagram's ports: translated as its first was.
    let Some(ports) = crate::frag::ports(ctx, ip, zone) else {
        return Ok(Egress::Pass);
    };
    let key = crate::conntrack::key_of(zone, ip, &ports);
    if let Some(entry) = conntrack::lookup(&key) {
        // SAFETY: a map value pointer, read at once.
        let (flags, backend_ip, backend_port) =
            unsafe { ((*entry).flags, (*entry).backend_ip, (*entry).backend_port) };
        let service = flags & CT_F_SERVICE != 0 && flags & CT_F_REPLY == 0;
        if service && conntrack::reopens(entry, ip.proto, ports.tcp_flags) {
            // A new connection on a closed one's port: a fresh backend choice (below).
            forget_service(&key, entry);
        } else if service {
            conntrack::seen(entry, ip.proto, ports.tcp_flags, false);
            if flags & CT_F_SNAT != 0 {
                // SAFETY: as above.
                let (nat_ip, nat_port) = unsafe { ((*entry).nat_ip, (*entry).nat_port) };
                let (src, dst) = ((nat_ip, nat_port), (backend_ip, backend_port));
                xlate::both(ctx, ip, &ports, src, dst)?;
                return Ok(if flags & CT_F_PROVIDER != 0 {
                    Egress::Provider
                } else {
                    Egress::Host
                });
            }
            xlate::destination(ctx, ip, &ports, backend_ip, backend_port)?;
            if flags & CT_F_HAIRPIN != 0 {
                xlate::source(ctx, ip, &ports, HAIRPIN_IP, ports.sport)?;
            }
            return Ok(Egress::Translated);
        } else {
            const HAIRPIN_REPLY: u8 = CT_F_SERVICE | CT_F_REPLY | CT_F_HAIRPIN;
            if flags & HAIRPIN_REPLY == HAIRPIN_REPLY {
                // Not for a later fragment: the hairpin's reply is small (left to later).
                if crate::frag::later(ip) {
                    return Ok(Egress::Pass);
                }
                return open::hairpin_reply(ctx, zone, ip, &ports, entry);
            }
            return Ok(Egress::Connection { entry, ports });
        }
    }
    // Only a datagram's first fragment opens a connection.
    if crate::frag::later(ip) {
        return Ok(Egress::Pass);
    }
    if ip.proto == PROTO_TCP && ports.tcp_flags & (TCP_SYN | TCP_ACK) == TCP_SYN {
        untangle(&key)?;
    }
    open::open(ctx, ip, &key, ports.tcp_flags, other_vpc)
}

/// A new TCP connection straight to an address whose reply tuple is a Service
/// connection's reply entry (the client used this port toward the ClusterIP, and the
/// backend behind it is this very address and port): that connection's replies would be
/// given the ClusterIP back. One that is over (closed, closing, quiet past its
/// lifetime) goes, both directions, so that this connection starts clean; one still
/// live refuses this one by name.
#[inline(never)]
fn untangle(key: &CtKey) -> Result<(), DropReason> {
    let reply = key.reversed();
    let Some(entry) = conntrack::lookup(&reply) else {
        return Ok(());
    };
    // SAFETY: a map value pointer, read at once.
    let flags = unsafe { (*entry).flags };
    const SERVICE_REPLY: u8 = CT_F_SERVICE | CT_F_REPLY;
    if flags & (SERVICE_REPLY | CT_F_HAIRPIN) != SERVICE_REPLY {
        return Ok(());
    }
    // SAFETY: as above.
    let (service_ip, service_port) = unsafe { ((*entry).service_ip, (*entry).service_port) };
    let original = CtKey::new(
        key.zone,
        key.saddr,
        service_ip,
        key.sport,
        service_port,
        key.proto,
    );
    // Over when either direction says so (a RST the client sent closes only its own).
    let over = conntrack::over(entry, key.proto)
        || conntrack::lookup(&original).is_none_or(|e| conntrack::over(e, key.proto));
    if !over {
        return Err(DropReason::SvcTupleInUse);
    }
    conntrack::forget(&original);
    conntrack::forget(&reply);
    Ok(())
}

/// Removes a Service connection's entries, from its original direction's: the reply's
/// (the backend's, or the hairpin's) and, through the Node's stack, the host's.
#[inline(never)]
fn forget_service(key: &CtKey, entry: *const CtEntry) {
    // SAFETY: a map value pointer, read at once.
    let e = unsafe { *entry };
    let hairpin = e.flags & CT_F_HAIRPIN != 0;
    conntrack::forget(&CtKey::new(
        key.zone,
        e.backend_ip,
        if hairpin { HAIRPIN_IP } else { key.saddr },
        e.backend_port,
        key.sport,
        key.proto,
    ));
    if e.flags & CT_F_SNAT != 0 {
        conntrack::forget(&CtKey::new(
            ZONE_HOST,
            e.backend_ip,
            e.nat_ip,
            e.backend_port,
            e.nat_port,
            key.proto,
        ));
    }
    conntrack::forget(key);
}

/// The table slot of the provider Vpc's `natSourceSubnet` segment (SVC-02).
#[inline(always)]
pub fn provider_table() -> Result<u32, DropReason> {
    // SAFETY: copied at once.
    let vni = maps::jn_svc_host
        .get(0)
        .map(|h| h.provider_vni)
        .filter(|v| *v != 0)
        .ok_or(DropReason::NoSourceAddress)?;
    // SAFETY: copied at once.
    unsafe { maps::jn_gw_seg.get(vni) }
        .map(|s| s.table)
        .ok_or(DropReason::NoSourceAddress)
}
