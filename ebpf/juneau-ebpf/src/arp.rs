//! ARP on the wire (IPv4 over Ethernet): reading a packet and turning a request into
//! its reply in place. Shared by the router (`gw::arp`) and the ElasticIP programs,
//! which answer ARP for different addresses with the same packet work.
use aya_ebpf::programs::TcContext;
use juneau_common::DropReason;

use crate::eth::{ETH_HLEN, load, store};

pub const ETH_P_ARP: u16 = 0x0806;
/// Ethernet + the 28 bytes of an IPv4-over-Ethernet ARP packet.
pub const ARP_END: usize = ETH_HLEN + 28;
/// htype 1, ptype 0x0800, hlen 6, plen 4, as the first 6 bytes read in memory order.
pub const ARP_ETH_IP4: u64 = 0x0406_0008_0100;

/// The fields of an ARP packet the datapath reads; addresses raw, as in the packet.
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
