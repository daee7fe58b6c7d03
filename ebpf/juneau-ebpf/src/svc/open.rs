//! A Service connection's first packet: its backend picked (affinity, else Maglev),
//! its pair of entries written, its source claimed for a hairpin or the Node's stack,
//! the packet translated.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{
        CT_F_AFFINITY, CT_F_HAIRPIN, CT_F_PROVIDER, CT_F_REPLY, CT_F_SERVICE, CT_F_SNAT, CT_NEW,
        CtEntry, CtKey, HAIRPIN_IP, PROTO_SCTP, PROTO_TCP, PROTO_UDP, ZONE_HOST,
    },
    svc::{
        Affinity, AffinityKey, BACKEND_HOST, BACKEND_PROVIDER, Backend, MAGLEV_SLOTS, SVC_AFFINITY,
        SvcEntry, SvcHost, SvcKey,
    },
};

use super::{Egress, provider_vni};
use crate::{conntrack, ipv4::Ipv4, l4, maps, xlate};

/// A connection's first packet to a frontend: its backend picked, its entries written,
/// the packet translated. The new entries are built in the per-CPU scratch
/// (`jn_ct_scratch`), in place, not on the stack: the router's frame and the calls it
/// makes stay within the verifier's 512 bytes.
#[inline(always)]
pub(super) fn open(
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
pub(super) fn hairpin_reply(
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
