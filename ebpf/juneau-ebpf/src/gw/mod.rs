//! The Vpc router: the gateway of every L2Network with `gateway`, on every Node with
//! the same address and MAC. A port whose segment has a gateway (`PORT_GATEWAY`) hands
//! two kinds of frames to the router program by a tail call (`enter`): frames to the
//! gateway MAC, and broadcast ARP (a request for the gateway is answered on this Node,
//! any other is flooded as the switch would). Pure-L2 frames of the segment pay one
//! compare; segments without a gateway one flag test.
//!
//! The router program (`gw_route`) is verified alone, so the port program stays small:
//! `arp` answers for the gateway, `route` forwards IPv4 between the segments of a Vpc,
//! the crate's `icmp` answers pings to a gateway and sends the router's ICMP errors.
pub mod arp;
pub mod listen;
pub mod route;
pub mod snoop;

use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason, GwSegment, PortConfig,
    port::{PORT_ACTIVE, PORT_GATEWAY, PORT_ROUTED, PORT_SG},
    tail::TAIL_ROUTER,
};

use crate::{arp::ETH_P_ARP, eth, maps, tail};

/// On a gateway port, before switching: a frame for the router leaves by the tail call
/// (the call does not return); `Ok(())` lets the switch forward the frame.
#[inline(always)]
pub fn enter(ctx: &TcContext, port: &PortConfig, addrs: &eth::Addrs) -> Result<(), DropReason> {
    // Every ARP packet: the router answers for the gateway, learns senders, and
    // refuses any that claims the gateway's address (unicast ones too: a reply sent
    // to one neighbour would take its gateway over).
    let to_router =
        eth::bits(&addrs.dst) == eth::bits(&port.gw_mac) || eth::ethertype(ctx) == Some(ETH_P_ARP);
    if !to_router {
        return Ok(());
    }
    tail::call(ctx, TAIL_ROUTER);
    Err(DropReason::NoRouter)
}

/// From a routed port (a Subnet NIC) whose veth runs `port_ingress` (a test run, or a
/// link an older daemon left): every frame goes to the router. The daemon attaches
/// `gw_route` to such a port directly.
#[inline(always)]
pub fn enter_routed(ctx: &TcContext) -> Result<i32, DropReason> {
    tail::call(ctx, TAIL_ROUTER);
    Err(DropReason::NoRouter)
}

/// A workload may not send as its gateway (it would capture the segment's exit).
#[inline(always)]
pub fn spoofs_gateway(port: &PortConfig, addrs: &eth::Addrs) -> bool {
    port.flags & PORT_GATEWAY != 0 && eth::bits(&addrs.src) == eth::bits(&port.gw_mac)
}

/// The router program: the port and its segment's gateway, then ARP or IPv4.
#[inline(always)]
pub fn try_route(ctx: &TcContext) -> Result<i32, DropReason> {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    // SAFETY: array value, copied at once.
    let port: PortConfig = unsafe {
        *maps::jn_l2_port
            .get_ptr(ifindex)
            .ok_or(DropReason::NotAPort)?
    };
    // A Subnet NIC's veth runs this program itself (no `port_ingress` before it): a
    // port not (or no longer) written is none.
    if port.flags & PORT_ACTIVE == 0 {
        return Err(DropReason::NotAPort);
    }
    if port.flags & PORT_GATEWAY == 0 {
        return Err(DropReason::NotRoutable);
    }
    // SAFETY: copied at once.
    let seg: GwSegment = unsafe { maps::jn_gw_seg.get(port.vni) }
        .copied()
        .ok_or(DropReason::NotRoutable)?;
    if port.flags & PORT_ROUTED != 0 {
        return from_routed_port(ctx, ifindex, &port, &seg);
    }
    match eth::ethertype(ctx) {
        Some(ETH_P_ARP) => arp::answer(ctx, ifindex, &port, &seg),
        Some(eth::ETH_P_IP) => route::ipv4(ctx, ifindex, &port, &seg),
        _ => Err(not_ipv4(&port, &seg, DropReason::NotRoutable)),
    }
}

/// Why a frame that is neither IPv4 nor ARP goes no further at the router: policy's
/// own reason where policy applies to the NIC (its segment's NetworkACL, its
/// SecurityGroups: POL-03), so a user reading the drops sees the policy at work.
#[inline(always)]
fn not_ipv4(port: &PortConfig, seg: &GwSegment, otherwise: DropReason) -> DropReason {
    if seg.acl != 0 || port.flags & PORT_SG != 0 {
        DropReason::PolicyEthertype
    } else {
        otherwise
    }
}

/// A Subnet NIC speaks IPv4 and ARP from its own MAC only (its address is checked by
/// each handler).
#[inline(always)]
fn from_routed_port(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
) -> Result<i32, DropReason> {
    // A VLAN tag the kernel moved into the skb's metadata: not plain IPv4.
    // SAFETY: the context pointer is valid for the program's run.
    if unsafe { (*ctx.skb.skb).vlan_present } != 0 {
        return Err(not_ipv4(port, seg, DropReason::NotIpv4OnSubnet));
    }
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    if eth::bits(&addrs.src) != eth::bits(&port.own_mac) {
        return Err(DropReason::SourceGuard);
    }
    match eth::ethertype(ctx) {
        Some(ETH_P_ARP) => arp::answer_routed(ctx, ifindex, port, seg),
        Some(eth::ETH_P_IP) => route::ipv4(ctx, ifindex, port, seg),
        _ => Err(not_ipv4(port, seg, DropReason::NotIpv4OnSubnet)),
    }
}
