//! An established NATGateway connection's packets, straight from the router's first
//! program (`gw_route`): the Service stage's connection lookup already found the
//! connection's entry (`CT_F_NAT`), so the packet is translated from it and leaves by
//! the Node's routing table there, without the two further programs (`gw_forward`,
//! `nat_out`) and their lookups. Only when every check the slow path makes is known
//! to pass: the sender's side of policy settled (or none applying), the TTL, the
//! table's route for the destination still the same NATGateway at the same address,
//! the Node's route and neighbour resolved, a whole datagram. Anything else takes the
//! slow path, which judges it in full.
//!
//! The route and the Node's hop are cached in the entry (`ct::NatHop`) for the rest of
//! the second they were looked up in, under the routes' epoch (`jn_gw_epoch`): an
//! established connection's packet then costs the connection lookup, the translation
//! and the redirect.
use aya_ebpf::{bindings::BPF_FIB_LKUP_RET_SUCCESS, helpers::bpf_redirect, programs::TcContext};
use juneau_common::{
    DropReason, GwSegment, PortConfig, RouteEntry,
    ct::{CT_F_NAT, CT_F_REPLY, CtEntry, NatHop, PROTO_ICMP, hop_second},
    gw::{GwStat, ROUTE_INTERNET_GW, ROUTE_NAT_GW},
    port::PORT_SG,
};

use crate::{conntrack, eth::ETH_HLEN, fib, ipv4::Ipv4, l4::Ports, maps, xlate};

/// What the fast path made of a packet.
pub enum Fast {
    /// Sent: the verdict to return.
    Done(i32),
    /// Left to the slow path; `settled`: the sender's side of policy is decided by the
    /// entry (`conntrack::egress_settled` said so, and moved it).
    Slow { settled: bool },
}

/// Whether `entry` is the original direction of a NATGateway connection.
#[inline(always)]
pub fn is_nat(entry: *mut CtEntry) -> bool {
    // SAFETY: a map value pointer, read at once.
    let flags = unsafe { (*entry).flags };
    flags & (CT_F_NAT | CT_F_REPLY) == CT_F_NAT
}

#[inline(always)]
pub fn try_send(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
    ip: &Ipv4,
    ports: &Ports,
    entry: *mut CtEntry,
) -> Result<Fast, DropReason> {
    // A whole datagram only (a first fragment records its ports on the slow path), and
    // not a new connection on a closed one's tuple (`nat_out` reopens it).
    if ip.frag & 0xff3f != 0 || conntrack::reopens(entry, ip.proto, ports.tcp_flags) {
        return Ok(Fast::Slow { settled: false });
    }
    // The sender's side of policy: none applies (no ACL on the segment, no groups on
    // the NIC: a NAT packet always crosses the gateway), or the entry settles it.
    let none_applies = seg.acl == 0 && port.flags & PORT_SG == 0;
    if !none_applies {
        let key = conntrack::key_of(port.vni, ip, ports);
        if !conntrack::egress_settled(entry, &key, ip, ports.tcp_flags) {
            return Ok(Fast::Slow { settled: false });
        }
    }
    let settled = !none_applies;
    if ip.ttl <= 1 {
        return Ok(Fast::Slow { settled });
    }
    // SAFETY: a map value pointer, read at once.
    let (nat_ip, nat_port, cached) =
        unsafe { ((*entry).nat_ip, (*entry).nat_port, (*entry).nat_hop()) };
    let now = conntrack::now();
    let epoch = maps::jn_gw_epoch.get(0).copied().unwrap_or(0);
    let len = ctx.len().saturating_sub(ETH_HLEN as u32);
    let (out, dmac, smac) = if cached.serves(epoch, now, len) {
        (cached.ifindex, cached.dmac, cached.smac)
    } else {
        let Some(hop) = look_up(ctx, ifindex, port.vni, ip, nat_ip, epoch, now) else {
            return Ok(Fast::Slow { settled });
        };
        // SAFETY: a map value pointer. Two CPUs sending on one connection across a
        // route change could interleave their writes; the mixed hop then serves the
        // rest of that second at most, as a torn state does (`conntrack::seen`).
        unsafe { (*entry).set_nat_hop(&hop) };
        (hop.ifindex, hop.dmac, hop.smac)
    };
    if none_applies {
        conntrack::seen_at(entry, ip.proto, ports.tcp_flags, false, now);
    }
    xlate::source(ctx, ip, ports, nat_ip, nat_port)?;
    if ip.proto == PROTO_ICMP {
        xlate::icmp_id(ctx, ports.sport, nat_port)?;
    }
    fib::hop_by(ctx, dmac, smac)?;
    crate::stats::gw(GwStat::NatFast);
    // SAFETY: plain helper call.
    Ok(Fast::Done(unsafe { bpf_redirect(out, 0) } as i32))
}

/// The way out in full: the table's route for the destination must still be the same
/// NATGateway at the same address, and the Node's FIB must have the route and the
/// neighbour, the packet fitting the device (a GSO one segment by segment). `None`:
/// the slow path judges it.
#[inline(always)]
fn look_up(
    ctx: &TcContext,
    ifindex: u32,
    vni: u32,
    ip: &Ipv4,
    nat_ip: u32,
    epoch: u32,
    now: u64,
) -> Option<NatHop> {
    // The segment read again, after the epoch: the daemon points a segment at its new
    // table before it bumps the epoch, so a hop cached under `epoch` never comes from a
    // table older than it (the copy the router took at its start may be).
    // SAFETY: copied at once.
    let slot = unsafe { maps::jn_gw_seg.get(vni) }.map(|s| s.table)?;
    let table = maps::jn_gw_rt.get(slot)?;
    let lpm = aya_ebpf::maps::lpm_trie::Key::new(32, ip.daddr.to_ne_bytes());
    let route: RouteEntry = table.get(&lpm).copied()?;
    let via_nat = route.kind == ROUTE_NAT_GW || route.kind == ROUTE_INTERNET_GW;
    if !via_nat || route.nh_ip != nat_ip {
        return None;
    }
    let found = fib::lookup(ctx, ifindex, nat_ip, ip.daddr, ip.proto, 0);
    if found.rc != BPF_FIB_LKUP_RET_SUCCESS as i64 {
        return None;
    }
    let (dmac, smac) = fib::macs(&found.req);
    // SAFETY: on success the kernel wrote the device's MTU into the union.
    let mtu = unsafe { found.req.__bindgen_anon_1.mtu_result };
    Some(NatHop {
        epoch: epoch as u16,
        mtu,
        second: hop_second(now),
        ifindex: found.req.ifindex,
        dmac,
        smac,
    })
}
