//! L2Network switching: learn the source, forward by destination MAC only (L2-01,
//! L2-28). Nothing above the Ethernet header is read (but the EtherType of an oversize
//! frame), so every protocol passes.
pub mod flood;
pub mod forward;
pub mod learn;

use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    eip::PORT_EIP,
    gw::{PORT_GATEWAY, PORT_ROUTED},
    l2::PORT_ACTIVE,
};

use crate::{arp::ETH_P_ARP, eth, gw, maps, overlay};

/// Frames sent by a workload into its port.
#[inline(always)]
pub fn from_port(ctx: &TcContext) -> Result<i32, DropReason> {
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
            return crate::eip::enter_port(ctx);
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

/// Frames of a segment arriving from another Node. Split horizon: they go to local
/// ports only, never back into the overlay.
#[inline(always)]
pub fn from_overlay(ctx: &TcContext) -> Result<i32, DropReason> {
    let (vni, vtep) = overlay::tunnel_source(ctx)?;
    let arp = eth::ethertype(ctx) == Some(ETH_P_ARP);
    // SAFETY: the value is copied at once.
    let Some(segment) = unsafe { maps::jn_l2_vni.get(vni) }.copied() else {
        // No port here: only the router may want it (an ARP copy of `gw::listen`).
        return Err(if arp {
            gw::listen::heard(ctx, vni, vtep)
        } else {
            DropReason::UnknownVni
        });
    };
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    let fdb = maps::jn_l2_fdb.get(segment).ok_or(DropReason::NoSegment)?;
    learn::learn_remote(fdb, &addrs.src, vtep);
    if arp {
        gw::snoop::from_overlay(ctx, vni, vtep);
    }
    forward::forward(ctx, fdb, segment, vni, 0, &addrs, true)
}
