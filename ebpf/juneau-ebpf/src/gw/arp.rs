//! ARP for the gateway (L2-13): a request for the gateway address is turned into the
//! reply in place and sent back to the asking port, so every Node answers for its own
//! workloads with the same address and MAC and no request for the gateway crosses the
//! overlay. Requests for anyone else are switched as usual (broadcast) or refused (a
//! unicast request to the gateway MAC about another address). The router never sends
//! ARP itself (L2-18); it learns the sender of every ARP packet it sees (`snoop`).
//! On a Subnet NIC it answers for the Subnet's neighbours as well, and nothing else
//! of ARP leaves the port (`answer_routed`).
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, GwSegment, NbrKey, PortConfig, gw::GwStat};

use crate::{
    arp::{ARP_END, ARP_ETH_IP4, Arp, read, reply},
    deliver::to_port,
    eth, maps,
};

/// ARP on a gateway L2Network's port: a request for the gateway is answered here;
/// any other is handed to `switch` (the hook's switch, as without a gateway).
#[inline(always)]
pub fn answer(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
    switch: impl FnOnce() -> Result<i32, DropReason>,
) -> Result<i32, DropReason> {
    let Arp {
        head,
        op,
        sender_mac,
        sender_ip: ip,
        target_ip,
    } = read(ctx)?;
    if head == ARP_ETH_IP4 {
        let mac = eth::from_bits(sender_mac);
        {
            // Nobody but the router speaks for the gateway (L2-13).
            if ip == seg.gw_ip || eth::is_gateway_range(&mac) {
                return Err(DropReason::SpoofedGatewayMac);
            }
            // Every other ARP packet of the segment teaches the router its sender.
            let here = crate::overlay::local_vtep();
            super::snoop::learn(port.vni, seg, ip, &mac, here);
            // And the routers of the Nodes that have no port of the segment, which no
            // flood reaches.
            if let Some(addrs) = eth::addrs(ctx)
                && eth::is_group(&addrs.dst)
            {
                super::listen::copies(ctx, port.segment, port.vni);
            }
        }
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ARP_END > end {
        return Err(DropReason::ShortFrame);
    }
    if head != ARP_ETH_IP4 || op != 1 || target_ip != seg.gw_ip {
        let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
        if eth::bits(&addrs.dst) == eth::bits(&seg.gw_mac) {
            return Err(DropReason::NotForRouter);
        }
        // Not about the gateway: switched as without a gateway.
        return switch();
    }
    reply(ctx, eth::bits(&seg.gw_mac), seg.gw_ip)?;
    crate::stats::gw(GwStat::ArpReplies);
    to_port(ctx, ifindex, port.flags)
}

/// ARP from a Subnet NIC: its own MAC and address only (or no address: a probe);
/// requests for the gateway and for the Subnet's neighbours are answered here with
/// their real MACs, so no ARP ever leaves the port; the rest is dropped.
#[inline(always)]
pub fn answer_routed(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
) -> Result<i32, DropReason> {
    let Arp {
        head,
        op,
        sender_mac,
        sender_ip,
        target_ip,
    } = read(ctx)?;
    if head != ARP_ETH_IP4 {
        return Err(DropReason::NotIpv4OnSubnet);
    }
    if sender_mac != eth::bits(&port.own_mac) || (sender_ip != port.own_ip && sender_ip != 0) {
        return Err(DropReason::SourceGuard);
    }
    if op == 2 && super::node::is_node(seg, target_ip) {
        // The Node asked (its route to a default-Subnet Pod of its own): its stack's.
        return Ok(aya_ebpf::bindings::TC_ACT_OK);
    }
    if op != 1 {
        // Replies and announcements: nobody else on a Subnet asks a Pod.
        return Err(DropReason::NotForRouter);
    }
    let mac = if target_ip == seg.gw_ip {
        eth::bits(&seg.gw_mac)
    } else {
        let key = NbrKey {
            vni: port.vni,
            ip: target_ip,
        };
        // Only what Juneau handed out: a Subnet has no hosts of its own making.
        // SAFETY: copied at once.
        match unsafe { maps::jn_gw_nbr.get(key) } {
            Some(n) if target_ip != port.own_ip => eth::bits(&n.mac),
            _ => return Err(DropReason::NoNeighbour),
        }
    };
    reply(ctx, mac, target_ip)?;
    crate::stats::gw(GwStat::ArpReplies);
    to_port(ctx, ifindex, port.flags)
}
