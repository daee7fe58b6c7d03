//! ClusterIP Services (kube-proxy-free): the first packet of a connection from a
//! consuming Pod to a Service's ClusterIP, port and protocol picks a backend (session
//! affinity, else the Service's Maglev table) and gets the connection's pair of
//! entries; it and every later packet of it leave with the backend as destination
//! ([`egress`], in the router before the route lookup, so the packet is routed to the
//! backend like any other). Replies are given the ClusterIP back as source where they
//! are delivered, on the client's Node ([`reverse`], from `deliver::to_port`).
//!
//! A Pod reaching itself through a Service (hairpin) has its source translated to
//! `HAIRPIN_IP` so that its reply comes back through its gateway, where
//! [`hairpin_reply`] gives it the ClusterIP. An ICMP error quoting a translated packet
//! is given the Service back where it is delivered to the client (`error`). Left to
//! later stages: SCTP is translated only where the port stays the same (its CRC covers
//! the ports); errors of hairpin and Node-stack (SVC-02) connections. A fragmented
//! datagram is translated whole (`crate::frag`: its later fragments, addresses only),
//! except a hairpin's reply.
mod error;
mod host;

pub use host::to_host;

use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{
        CT_F_AFFINITY, CT_F_HAIRPIN, CT_F_NAT, CT_F_PROVIDER, CT_F_REPLY, CT_F_SERVICE, CT_F_SNAT,
        CT_NEW, CtEntry, CtKey, HAIRPIN_IP, PROTO_SCTP, PROTO_TCP, PROTO_UDP, ZONE_HOST,
    },
    svc::{
        Affinity, AffinityKey, BACKEND_HOST, BACKEND_PROVIDER, Backend, MAGLEV_SLOTS, SVC_AFFINITY,
        SvcEntry, SvcHost, SvcKey,
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
    /// Not to a Service, and the sender's side of policy is already decided by the
    /// connection's entry (`conntrack::egress_settled`): routed as it is.
    Settled,
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
    /// Not to a Service: a NATGateway connection's packet, its entry found here, which
    /// the router may send on at once (`nat::fast`).
    Nat {
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

/// The connection's backend, its entries made for a new one ([`open`]). `zone`: the
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
    let key = CtKey::new(zone, ip.saddr, ip.daddr, ports.sport, ports.dport, ip.proto);
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
                return hairpin_reply(ctx, zone, ip, &ports, entry);
            }
            if flags & (CT_F_NAT | CT_F_REPLY) == CT_F_NAT {
                return Ok(Egress::Nat { entry, ports });
            }
            // Not a Service's: policy's entry, found once for both stages.
            if crate::conntrack::egress_settled(entry, &key, ip, ports.tcp_flags) {
                return Ok(Egress::Settled);
            }
            return Ok(Egress::Pass);
        }
    }
    // Only a datagram's first fragment opens a connection.
    if crate::frag::later(ip) {
        return Ok(Egress::Pass);
    }
    if ip.proto == PROTO_TCP && ports.tcp_flags & (TCP_SYN | TCP_ACK) == TCP_SYN {
        untangle(&key)?;
    }
    open(ctx, ip, &key, ports.tcp_flags, other_vpc)
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

/// A connection's first packet to a frontend: its backend picked, its entries written,
/// the packet translated. The new entries are built in the per-CPU scratch
/// (`jn_ct_scratch`), in place, not on the stack: the router's frame and the calls it
/// makes stay within the verifier's 512 bytes.
#[inline(always)]
fn open(
    ctx: &TcContext,
    ip: &Ipv4,
    key: &CtKey,
    tcp_flags: u8,
    other_vpc: bool,
) -> Result<Egress, DropReason> {
    let zone = key.zone;
    let ports = l4::Ports {
        sport: key.sport,
        dport: key.dport,
        tcp_flags,
    };
    let svc_key = SvcKey {
        ip: ip.daddr,
        port: ports.dport,
        proto: ip.proto,
        pad: 0,
    };
    // SAFETY: copied at once (the daemon replaces entries whole).
    let Some(svc): Option<SvcEntry> = (unsafe { maps::jn_svc.get(svc_key) }).copied() else {
        return Ok(Egress::Pass);
    };
    if svc.backends == 0 {
        return Ok(Egress::Reject);
    }
    let (backend_id, by_affinity) = pick(ctx, &svc, ip.saddr)?;
    // SAFETY: copied at once.
    let backend = maps::jn_svc_backend
        .get(backend_id)
        .copied()
        .ok_or(DropReason::NoBackend)?;
    if backend.ip == 0 {
        return Err(DropReason::NoBackend);
    }
    if ip.proto == PROTO_SCTP && backend.port != ports.dport {
        return Err(DropReason::SvcUnsupported);
    }
    let now = conntrack::now();
    let host = backend.flags & BACKEND_HOST != 0;
    // A provider Pod from another Vpc: its source translated as for a host backend,
    // so that overlapping Vpcs get their own replies.
    let provider = other_vpc && backend.flags & BACKEND_PROVIDER != 0;
    // No provider table to route by yet: refused before any entry is made.
    if provider && provider_vni() == 0 {
        return Err(DropReason::NoSourceAddress);
    }
    let snat = host || provider;
    let hairpin = !snat && backend.ip == ip.saddr;
    let flags = CT_F_SERVICE
        | if by_affinity { CT_F_AFFINITY } else { 0 }
        | if snat { CT_F_SNAT } else { 0 }
        | if provider { CT_F_PROVIDER } else { 0 }
        | if hairpin { CT_F_HAIRPIN } else { 0 };
    let scratch = maps::jn_ct_scratch
        .get_ptr_mut(0)
        .ok_or(DropReason::CtFull)?;
    // SAFETY: this CPU's scratch value, for this program run alone.
    let scratch = unsafe { &mut *scratch };
    let [fwd, rev, host_entry] = &mut scratch.entries;
    let [rev_key, host_key] = &mut scratch.keys;
    // Written in place, field by field (a struct literal is built on the stack first).
    conntrack::clear(fwd);
    fwd.last_seen_ns = now;
    fwd.state = CT_NEW;
    fwd.flags = flags;
    fwd.tcp_flags = ports.tcp_flags;
    fwd.service = svc.id;
    fwd.backend_ip = backend.ip;
    fwd.backend_port = backend.port;
    fwd.service_port = ports.dport;
    fwd.service_ip = ip.daddr;
    // Through the Node's stack or to another Vpc: the reply's entry in `ZONE_HOST`
    // first, which picks the source port (the client's own when free).
    if snat {
        let (nat_ip, nat_port) =
            claim_source(zone, ip, &ports, &backend, fwd, host_entry, host_key)?;
        fwd.nat_ip = nat_ip;
        fwd.nat_port = nat_port;
    }
    // The reply as it leaves the backend: to the client, or (hairpin) to the address
    // the client's source became, which the reply entry gives back.
    *rev_key = CtKey::new(
        zone,
        backend.ip,
        if hairpin { HAIRPIN_IP } else { ip.saddr },
        backend.port,
        ports.sport,
        ip.proto,
    );
    *rev = *fwd;
    rev.flags = flags | CT_F_REPLY;
    rev.tcp_flags = 0;
    if hairpin {
        rev.nat_ip = ip.saddr;
    }
    if let Err(e) = conntrack::create(key, fwd, rev_key, rev) {
        if snat {
            conntrack::forget(host_key);
        }
        return Err(e);
    }
    if svc.flags & SVC_AFFINITY != 0 {
        let _ = maps::jn_svc_affinity.insert(
            AffinityKey {
                service: svc.id,
                client: ip.saddr,
            },
            Affinity {
                backend: backend_id,
                pad: 0,
                last_seen_ns: now,
            },
            0,
        );
    }
    if snat {
        let (src, dst) = ((fwd.nat_ip, fwd.nat_port), (backend.ip, backend.port));
        xlate::both(ctx, ip, &ports, src, dst)?;
        return Ok(if provider {
            Egress::Provider
        } else {
            Egress::Host
        });
    }
    xlate::destination(ctx, ip, &ports, backend.ip, backend.port)?;
    if hairpin {
        xlate::source(ctx, ip, &ports, HAIRPIN_IP, ports.sport)?;
    }
    Ok(Egress::Translated)
}

/// A hairpin connection's reply, as the Pod sends it to its gateway: from the
/// ClusterIP and port, back to the Pod itself.
#[inline(always)]
fn hairpin_reply(
    ctx: &TcContext,
    zone: u32,
    ip: &Ipv4,
    ports: &l4::Ports,
    entry: *mut CtEntry,
) -> Result<Egress, DropReason> {
    // SAFETY: a map value pointer, read at once.
    let (client, service_ip, service_port) =
        unsafe { ((*entry).nat_ip, (*entry).service_ip, (*entry).service_port) };
    let fwd_key = CtKey::new(
        zone,
        client,
        service_ip,
        ports.dport,
        service_port,
        ip.proto,
    );
    conntrack::answered(entry, &fwd_key, ip.proto, ports.tcp_flags);
    xlate::source(ctx, ip, ports, service_ip, service_port)?;
    xlate::destination_of(ctx, ip.proto, ip.daddr, ports.dport, client, ports.dport)?;
    Ok(Egress::Translated)
}

/// Tries of a translated source port before the connection is refused.
const SOURCE_PORT_TRIES: u32 = 4;

/// The entry of a host backend's replies, in [`ZONE_HOST`], at this Node's Service
/// source address and a port nobody holds toward that backend: the client's own port
/// first, then (TCP, UDP) ephemeral ports derived from it. Its key (written to `key`),
/// and the source.
#[inline(always)]
fn claim_source(
    zone: u32,
    ip: &Ipv4,
    ports: &l4::Ports,
    backend: &Backend,
    fwd: &CtEntry,
    entry: &mut CtEntry,
    key: &mut CtKey,
) -> Result<(u32, u16), DropReason> {
    // SAFETY: copied at once.
    let cfg: SvcHost = maps::jn_svc_host
        .get(0)
        .copied()
        .ok_or(DropReason::NoSourceAddress)?;
    if cfg.snat_ip == 0 || cfg.ifindex == 0 {
        return Err(DropReason::NoSourceAddress);
    }
    *entry = *fwd;
    entry.flags = fwd.flags | CT_F_REPLY;
    entry.tcp_flags = 0;
    entry.nat_ip = ip.saddr;
    entry.nat_port = ports.sport;
    entry.nat_zone = zone;
    *key = CtKey::new(
        ZONE_HOST,
        backend.ip,
        cfg.snat_ip,
        backend.port,
        ports.sport,
        ip.proto,
    );
    let tries = if ip.proto == PROTO_TCP || ip.proto == PROTO_UDP {
        SOURCE_PORT_TRIES
    } else {
        1
    };
    let base = u16::from_be(ports.sport) as u32;
    for i in 0..tries {
        if i > 0 {
            // 32768-60999, the kernel's default ephemeral range.
            let p = 32768 + (base.wrapping_add(i.wrapping_mul(40503))) % 28232;
            key.dport = (p as u16).to_be();
        }
        if conntrack::claim(key, entry)? {
            return Ok((cfg.snat_ip, key.dport));
        }
    }
    Err(DropReason::NoSourcePort)
}

/// The backend of a new connection: the client's, within the affinity timeout, else
/// the Maglev table's slot for the packet's flow hash.
#[inline(always)]
fn pick(ctx: &TcContext, svc: &SvcEntry, client: u32) -> Result<(u32, bool), DropReason> {
    if svc.flags & SVC_AFFINITY != 0 {
        let key = AffinityKey {
            service: svc.id,
            client,
        };
        // SAFETY: copied at once.
        if let Some(a) = unsafe { maps::jn_svc_affinity.get(key) }.copied() {
            let age = conntrack::now().saturating_sub(a.last_seen_ns);
            if age < svc.affinity_s as u64 * 1_000_000_000 {
                return Ok((a.backend, true));
            }
        }
    }
    // SAFETY: a plain helper call on the program's context.
    let hash = unsafe { aya_ebpf::helpers::bpf_get_hash_recalc(ctx.skb.skb) };
    let slot = hash % MAGLEV_SLOTS;
    let table = maps::jn_svc_maglev
        .get(svc.id)
        .ok_or(DropReason::NoBackend)?;
    table
        .get(slot)
        .copied()
        .map(|b| (b, false))
        .ok_or(DropReason::NoBackend)
}

/// A packet delivered to a port of segment `zone`: when it is the reply of a Service
/// connection, its source becomes the ClusterIP and port again.
#[inline(always)]
pub fn reverse(ctx: &TcContext, zone: u32) -> Result<(), DropReason> {
    let Ok(ip) = crate::ipv4::read(ctx) else {
        return Ok(());
    };
    let Some(ports) = crate::frag::ports(ctx, &ip, zone) else {
        return error::reverse(ctx, zone, &ip);
    };
    let key = CtKey::new(zone, ip.saddr, ip.daddr, ports.sport, ports.dport, ip.proto);
    let Some(entry) = conntrack::lookup(&key) else {
        return Ok(());
    };
    // SAFETY: a map value pointer, read at once.
    let (flags, service_ip, service_port) =
        unsafe { ((*entry).flags, (*entry).service_ip, (*entry).service_port) };
    if flags & (CT_F_SERVICE | CT_F_REPLY) != CT_F_SERVICE | CT_F_REPLY {
        return Ok(());
    }
    let fwd_key = CtKey::new(
        zone,
        ip.daddr,
        service_ip,
        ports.dport,
        service_port,
        ip.proto,
    );
    // A Service flow quiet past its lifetime both ways (an expired UDP flow not yet
    // swept) gives nothing back: what comes now is not its reply. One whose client
    // still sends lives on, however long its server was quiet.
    if ip.proto != PROTO_TCP
        && conntrack::over(entry, ip.proto)
        && conntrack::lookup(&fwd_key).is_none_or(|f| conntrack::over(f, ip.proto))
    {
        return Ok(());
    }
    conntrack::answered(entry, &fwd_key, ip.proto, ports.tcp_flags);
    xlate::source(ctx, &ip, &ports, service_ip, service_port)
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
