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
    deliver::deliver,
    eth::{self, ETH_HLEN, load, store},
    l2, maps,
};

/// Ethernet + the 28 bytes of an IPv4-over-Ethernet ARP packet.
const ARP_END: usize = ETH_HLEN + 28;
/// htype 1, ptype 0x0800, hlen 6, plen 4, as the first 6 bytes read in memory order.
pub const ARP_ETH_IP4: u64 = 0x0406_0008_0100;

/// The fields of an ARP packet the router reads; addresses raw, as in the packet.
pub struct Arp {
    /// The first 6 bytes (hardware and protocol types and lengths), as one word.
    pub head: u64,
    pub op: u16,
    pub sender_mac: u64,
    pub sender_ip: u32,
    pub target_ip: u32,
}

#[inline(always)]
pub fn read(ctx: &TcContext) -> Result<Arp, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ARP_END > end {
        return Err(DropReason::ShortFrame);
    }
    // SAFETY: inside [start, start + ARP_END), checked above.
    unsafe {
        Ok(Arp {
            head: load::<u32>(start + ETH_HLEN) as u64
                | (load::<u16>(start + ETH_HLEN + 4) as u64) << 32,
            op: u16::from_be(load::<u16>(start + ETH_HLEN + 6)),
            sender_mac: load::<u32>(start + ETH_HLEN + 8) as u64
                | (load::<u16>(start + ETH_HLEN + 12) as u64) << 32,
            sender_ip: load::<u32>(start + ETH_HLEN + 14),
            target_ip: load::<u32>(start + ETH_HLEN + 24),
        })
    }
}

#[inline(always)]
pub fn answer(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
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
        return l2::switch_from_port(ctx, port, ifindex);
    }
    reply(ctx, eth::bits(&seg.gw_mac), seg.gw_ip)?;
    super::count(GwStat::ArpReplies);
    Ok(deliver(ifindex, port.flags))
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
    if op != 1 {
        // Replies and announcements: nobody on a Subnet asks a Pod.
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
    super::count(GwStat::ArpReplies);
    Ok(deliver(ifindex, port.flags))
}

/// Turns the request in the frame into the reply `ip is-at mac`, addressed back to
/// the asker.
#[inline(always)]
pub fn reply(ctx: &TcContext, mac: u64, ip: u32) -> Result<(), DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ARP_END > end {
        return Err(DropReason::ShortFrame);
    }
    // SAFETY: inside [start, start + ARP_END), checked above.
    unsafe {
        let sender_mac_lo = load::<u32>(start + ETH_HLEN + 8);
        let sender_mac_hi = load::<u16>(start + ETH_HLEN + 12);
        let sender_ip = load::<u32>(start + ETH_HLEN + 14);
        // Ethernet: back to the sender, from the one answered for.
        store::<u32>(start, sender_mac_lo);
        store::<u16>(start + 4, sender_mac_hi);
        store::<u32>(start + 6, mac as u32);
        store::<u16>(start + 10, (mac >> 32) as u16);
        // ARP reply: sender = the one answered for, target = the asker.
        store::<u16>(start + ETH_HLEN + 6, 2u16.to_be());
        store::<u32>(start + ETH_HLEN + 8, mac as u32);
        store::<u16>(start + ETH_HLEN + 12, (mac >> 32) as u16);
        store::<u32>(start + ETH_HLEN + 14, ip);
        store::<u32>(start + ETH_HLEN + 18, sender_mac_lo);
        store::<u16>(start + ETH_HLEN + 22, sender_mac_hi);
        store::<u32>(start + ETH_HLEN + 24, sender_ip);
    }
    Ok(())
}
