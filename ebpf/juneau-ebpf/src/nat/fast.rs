//! An established NATGateway connection's packets, straight from the router's first
//! program (`gw_route`): the Service stage's connection lookup already found the
//! connection's entry (`CT_F_NAT`), so the packet is translated from it and leaves by
//! the Node's routing table there, without the two further programs (`gw_forward`,
//! `nat_out`) and their lookups. Only when every check the slow path makes is known
//! to pass: the sender's side of policy settled (or none applying), the TTL, the
//! table's route for the destination still the same NATGateway at the same address,
//! the Node's route and neighbour resolved, a whole datagram. Anything else takes the
//! slow path, which judges it in full.
use aya_ebpf::{bindings::BPF_FIB_LKUP_RET_SUCCESS, helpers::bpf_redirect, programs::TcContext};
use juneau_common::{
    DropReason, GwSegment, PortConfig, RouteEntry,
    ct::{CtEntry, CtKey, PROTO_ICMP},
    gw::{GwStat, ROUTE_NAT_GW},
    port::PORT_SG,
};

use crate::{conntrack, fib, ipv4::Ipv4, l4::Ports, maps, policy, xlate};

/// What the fast path made of a packet.
pub enum Fast {
    /// Sent: the verdict to return.
    Done(i32),
    /// Left to the slow path; `settled`: the sender's side of policy is decided by the
    /// entry (`policy::egress_settled` said so, and moved it).
    Slow { settled: bool },
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
    let key = CtKey::new(
        port.vni,
        ip.saddr,
        ip.daddr,
        ports.sport,
        ports.dport,
        ip.proto,
    );
    if !none_applies && !policy::egress_settled(entry, &key, ip, ports.tcp_flags) {
        return Ok(Fast::Slow { settled: false });
    }
    let settled = !none_applies;
    if ip.ttl <= 1 {
        return Ok(Fast::Slow { settled });
    }
    // SAFETY: a map value pointer, read at once.
    let (nat_ip, nat_port) = unsafe { ((*entry).nat_ip, (*entry).nat_port) };
    let Some(table) = maps::jn_gw_rt.get(seg.table) else {
        return Ok(Fast::Slow { settled });
    };
    let lpm = aya_ebpf::maps::lpm_trie::Key::new(32, ip.daddr.to_ne_bytes());
    let Some(route): Option<RouteEntry> = table.get(&lpm).copied() else {
        return Ok(Fast::Slow { settled });
    };
    if route.kind != ROUTE_NAT_GW || route.nh_ip != nat_ip {
        return Ok(Fast::Slow { settled });
    }
    let found = fib::lookup(ctx, ifindex, nat_ip, ip.daddr, ip.proto, 0);
    if found.rc != BPF_FIB_LKUP_RET_SUCCESS as i64 {
        return Ok(Fast::Slow { settled });
    }
    if none_applies {
        conntrack::seen(entry, ip.proto, ports.tcp_flags, false);
    }
    xlate::source(ctx, ip, ports, nat_ip, nat_port)?;
    if ip.proto == PROTO_ICMP {
        xlate::icmp_id(ctx, ports.sport, nat_port)?;
    }
    fib::hop(ctx, &found.req)?;
    crate::gw::count(GwStat::NatFast);
    // SAFETY: plain helper call.
    Ok(Fast::Done(
        unsafe { bpf_redirect(found.req.ifindex, 0) } as i32
    ))
}
