//! The Vpc router: the gateway of every L2Network with `gateway`, on every Node with
//! the same address and MAC. A port whose segment has a gateway (`PORT_GATEWAY`) hands
//! two kinds of frames to the router program by a tail call (`enter`): frames to the
//! gateway MAC, and broadcast ARP (a request for the gateway is answered on this Node,
//! any other is flooded as the switch would). Pure-L2 frames of the segment pay one
//! compare; segments without a gateway one flag test.
//!
//! The router program (`gw_route`) is verified alone, so the port program stays small:
//! `arp` answers for the gateway, `route` forwards IPv4 between the segments of a Vpc,
//! `node` hands the Node's own traffic with its default-Subnet Pods to its stack, the
//! crate's `icmp` answers pings to a gateway and sends the router's ICMP errors.
pub mod arp;
pub mod listen;
pub mod node;
pub mod route;
pub mod snoop;

use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, PortConfig, port::PORT_GATEWAY, tail::TAIL_ROUTER};

use crate::{arp::ETH_P_ARP, eth, tail};

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
