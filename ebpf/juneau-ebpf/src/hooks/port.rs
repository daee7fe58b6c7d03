//! Ingress of a Pod NIC's host-side veth (a tc filter, or a TCX link). An L2Network
//! NIC's runs `port_ingress`, which enters the Vpc router (`gw_route`) by a tail call
//! for what is the gateway's. A routed NIC's veth runs its own program directly, with
//! no `port_ingress` and no tail call before it: a Subnet NIC's `gw_route`, a direct
//! ElasticIP NIC's `eip_port` (`PortKind::program` in the daemon). `port_ingress`
//! still hands a routed port's frames to them (test runs, a link an older daemon left).
//!
//! ```text
//! port = jn_l2_port[ifindex]          NOT_A_PORT
//! routed port?  -> tail: eip_port (PORT_EIP) or gw_route (a Subnet NIC)
//! MTU (non-IP)                         TOO_BIG
//! gateway MAC as source?               SPOOFED_GATEWAY_MAC
//! learn the source (l2::learn)
//! gateway port, frame for the router?  -> tail: gw_route
//! switch (l2::forward): known unicast -> deliver::to_port / overlay, else flood
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    port::{PORT_ACTIVE, PORT_EIP, PORT_GATEWAY, PORT_ROUTED},
};

use crate::{
    eip, eth, gw,
    l2::{forward, learn},
    maps,
};

/// Frames sent by a workload into its port.
#[inline(always)]
pub fn ingress(ctx: &TcContext) -> Result<i32, DropReason> {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    let port = maps::jn_l2_port
        .get_ptr_mut(ifindex)
        .ok_or(DropReason::NotAPort)?;
    // SAFETY: array values live as long as the map; concurrent writers only touch the
    // learning cache, where a torn read costs one extra table lookup.
    let port = unsafe { &mut *port };
    if port.flags & PORT_ACTIVE == 0 {
        return Err(DropReason::NotAPort);
    }
    if port.flags & PORT_ROUTED != 0 {
        // A direct ElasticIP NIC or a Subnet NIC: nothing is switched or learned; its
        // own program takes it all.
        if port.flags & PORT_EIP != 0 {
            return eip::enter_port(ctx);
        }
        return gw::enter_routed(ctx);
    }
    if port.mtu != 0 && ctx.len() > port.mtu + eth::ETH_HLEN as u32 && !eth::is_ip(ctx) {
        // L2-21: a non-IP frame cannot be fragmented; it would not fit the segment.
        return Err(DropReason::TooBig);
    }
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    if gw::spoofs_gateway(port, &addrs) {
        return Err(DropReason::SpoofedGatewayMac);
    }
    let segment = port.segment;
    let vni = port.vni;
    let fdb = maps::jn_l2_fdb.get(segment).ok_or(DropReason::NoSegment)?;
    learn::learn_local(port, ifindex, fdb, &addrs.src);
    if port.flags & PORT_GATEWAY != 0 {
        gw::enter(ctx, port, &addrs)?;
    }
    forward::forward(ctx, fdb, segment, vni, ifindex, &addrs, false)
}
