//! ARP for the gateway (L2-13): a request for the gateway address is turned into the
//! reply in place and sent back to the asking port, so every Node answers for its own
//! workloads with the same address and MAC and no request for the gateway crosses the
//! overlay. Requests for anyone else are switched as usual (broadcast) or refused (a
//! unicast request to the gateway MAC about another address). The router never sends
//! ARP itself (L2-18); it learns the sender of every ARP packet it sees (`snoop`).
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, GwSegment, PortConfig, gw::GwStat};

use crate::{
    deliver::deliver,
    eth::{self, ETH_HLEN, load, store},
    l2,
};

/// Ethernet + the 28 bytes of an IPv4-over-Ethernet ARP packet.
const ARP_END: usize = ETH_HLEN + 28;
/// htype 1, ptype 0x0800, hlen 6, plen 4, as the first 6 bytes read in memory order.
pub const ARP_ETH_IP4: u64 = 0x0406_0008_0100;

#[inline(always)]
pub fn answer(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
) -> Result<i32, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ARP_END > end {
        return Err(DropReason::ShortFrame);
    }
    // SAFETY (loads and stores): inside [start, start + ARP_END), checked above.
    let (head, op, target_ip) = unsafe {
        (
            load::<u32>(start + ETH_HLEN) as u64 | (load::<u16>(start + ETH_HLEN + 4) as u64) << 32,
            u16::from_be(load::<u16>(start + ETH_HLEN + 6)),
            load::<u32>(start + ETH_HLEN + 24),
        )
    };
    if head == ARP_ETH_IP4 {
        if let Some((ip, mac)) = super::snoop::sender(ctx) {
            // Nobody but the router speaks for the gateway (L2-13).
            if ip == seg.gw_ip || eth::is_gateway_range(&mac) {
                return Err(DropReason::SpoofedGatewayMac);
            }
            // Every other ARP packet of the segment teaches the router its sender.
            let here = crate::overlay::local_vtep();
            super::snoop::learn(port.vni, seg, ip, &mac, here);
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
        return l2::switch_from_port(ctx, port, ifindex);
    }
    // SAFETY: as above.
    unsafe {
        let sender_mac_lo = load::<u32>(start + ETH_HLEN + 8);
        let sender_mac_hi = load::<u16>(start + ETH_HLEN + 12);
        let sender_ip = load::<u32>(start + ETH_HLEN + 14);
        let gw = eth::bits(&seg.gw_mac);
        // Ethernet: back to the sender, from the gateway.
        store::<u32>(start, sender_mac_lo);
        store::<u16>(start + 4, sender_mac_hi);
        store::<u32>(start + 6, gw as u32);
        store::<u16>(start + 10, (gw >> 32) as u16);
        // ARP reply: sender = the gateway, target = the asker.
        store::<u16>(start + ETH_HLEN + 6, 2u16.to_be());
        store::<u32>(start + ETH_HLEN + 8, gw as u32);
        store::<u16>(start + ETH_HLEN + 12, (gw >> 32) as u16);
        store::<u32>(start + ETH_HLEN + 14, seg.gw_ip);
        store::<u32>(start + ETH_HLEN + 18, sender_mac_lo);
        store::<u16>(start + ETH_HLEN + 22, sender_mac_hi);
        store::<u32>(start + ETH_HLEN + 24, sender_ip);
    }
    super::count(GwStat::ArpReplies);
    Ok(deliver(ifindex, port.flags))
}
