//! ClusterIP Services (kube-proxy-free): the first packet of a connection from a
//! consuming Pod to a Service's ClusterIP, port and protocol picks a backend (session
//! affinity, else the Service's Maglev table) and gets the connection's pair of
//! entries; it and every later packet of it leave with the backend as destination
//! ([`egress`], in the router before the route lookup, so the packet is routed to the
//! backend like any other). Replies are given the ClusterIP back as source where they
//! are delivered, on the client's Node ([`reverse`], from `deliver::to_port`).
//!
//! Left to the stack or to later stages: ICMP errors quoting a translated packet are
//! not rewritten; a Pod reaching itself through a Service (hairpin) needs the source
//! translation of SVC-02; SCTP is translated only where the port stays the same (its
//! CRC covers the ports).
mod nat;

use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{CT_F_AFFINITY, CT_F_REPLY, CT_F_SERVICE, CT_NEW, CtEntry, CtKey, PROTO_SCTP},
    svc::{Affinity, AffinityKey, MAGLEV_SLOTS, SVC_AFFINITY, SvcEntry, SvcKey},
};

use crate::{conntrack, ipv4::Ipv4, l4, maps};

/// What the Service stage made of a packet.
pub enum Egress {
    /// Not to a Service: routed as it is.
    Pass,
    /// Translated: routed to this destination (the backend) now.
    Translated(u32),
    /// To a Service without a backend that takes connections: rejected with ICMP port
    /// unreachable from the ClusterIP (as kube-proxy does).
    Reject,
}

/// The connection's backend, its entries made for a new one. `zone`: the VNI of the
/// client's segment.
#[inline(always)]
pub fn egress(ctx: &TcContext, zone: u32, ip: &Ipv4) -> Result<Egress, DropReason> {
    let Some(ports) = l4::read(ctx, ip) else {
        return Ok(Egress::Pass);
    };
    let key = CtKey {
        zone,
        saddr: ip.saddr,
        daddr: ip.daddr,
        sport: ports.sport,
        dport: ports.dport,
        proto: ip.proto,
        pad: [0; 3],
    };
    if let Some(entry) = conntrack::lookup(&key) {
        // SAFETY: a map value pointer, read at once.
        let (flags, backend_ip, backend_port) =
            unsafe { ((*entry).flags, (*entry).backend_ip, (*entry).backend_port) };
        if flags & CT_F_SERVICE != 0 && flags & CT_F_REPLY == 0 {
            conntrack::seen(entry, ip.proto, ports.tcp_flags, false);
            nat::destination(ctx, ip, &ports, backend_ip, backend_port)?;
            return Ok(Egress::Translated(backend_ip));
        }
        return Ok(Egress::Pass);
    }
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
    let flags = CT_F_SERVICE | if by_affinity { CT_F_AFFINITY } else { 0 };
    let fwd = CtEntry {
        last_seen_ns: now,
        state: CT_NEW,
        flags,
        tcp_flags: ports.tcp_flags,
        service: svc.id,
        backend_ip: backend.ip,
        backend_port: backend.port,
        service_port: ports.dport,
        service_ip: ip.daddr,
        ..CtEntry::default()
    };
    let rev_key = CtKey {
        zone,
        saddr: backend.ip,
        daddr: ip.saddr,
        sport: backend.port,
        dport: ports.sport,
        proto: ip.proto,
        pad: [0; 3],
    };
    let rev = CtEntry {
        flags: flags | CT_F_REPLY,
        tcp_flags: 0,
        ..fwd
    };
    conntrack::create(&key, &fwd, &rev_key, &rev)?;
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
    nat::destination(ctx, ip, &ports, backend.ip, backend.port)?;
    Ok(Egress::Translated(backend.ip))
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
    let Some(ports) = l4::read(ctx, &ip) else {
        return Ok(());
    };
    let key = CtKey {
        zone,
        saddr: ip.saddr,
        daddr: ip.daddr,
        sport: ports.sport,
        dport: ports.dport,
        proto: ip.proto,
        pad: [0; 3],
    };
    let Some(entry) = conntrack::lookup(&key) else {
        return Ok(());
    };
    // SAFETY: a map value pointer, read at once.
    let (flags, service_ip, service_port) =
        unsafe { ((*entry).flags, (*entry).service_ip, (*entry).service_port) };
    if flags & (CT_F_SERVICE | CT_F_REPLY) != CT_F_SERVICE | CT_F_REPLY {
        return Ok(());
    }
    // SAFETY: as above.
    let first_reply = unsafe { (*entry).state } == CT_NEW;
    conntrack::seen(entry, ip.proto, ports.tcp_flags, true);
    if first_reply {
        // The original direction learns it was answered (its timeout lengthens).
        let fwd_key = CtKey {
            zone,
            saddr: ip.daddr,
            daddr: service_ip,
            sport: ports.dport,
            dport: service_port,
            proto: ip.proto,
            pad: [0; 3],
        };
        if let Some(fwd) = conntrack::lookup(&fwd_key) {
            conntrack::seen(fwd, ip.proto, 0, true);
        }
    }
    nat::source(ctx, &ip, &ports, service_ip, service_port)
}
