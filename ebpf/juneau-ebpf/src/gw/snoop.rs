//! Neighbours learned from ARP (L2-18): a host Juneau did not address (self-assigned,
//! or a VM behind a bridge in a Pod) becomes reachable through the router once it has
//! sent one ARP packet, on its own Node (the router sees every broadcast ARP of a
//! gateway port) and on every other Node (ARP that crosses the overlay: to the Nodes
//! with a port of its segment as a flood, to the others as a copy, `listen`). What the daemon seeded from IPAM wins: an ARP packet cannot move an
//! address Juneau handed out. Learned bindings live in their own LRU table.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    FdbKey, GwSegment, NbrEntry, NbrKey,
    gw::{GwStat, NBR_SNOOPED},
};

use crate::{
    arp::{self, ARP_ETH_IP4},
    eth,
    ipv4::martian,
    maps,
};

/// The sender of an IPv4-over-Ethernet ARP packet, if the frame is one.
#[inline(always)]
pub fn sender(ctx: &TcContext) -> Option<(u32, FdbKey)> {
    let arp = arp::read(ctx).ok()?;
    (arp.head == ARP_ETH_IP4).then(|| (arp.sender_ip, eth::from_bits(arp.sender_mac)))
}

/// Binds `ip` to `mac` behind `vtep` (0 or this Node's: here) on segment `vni`.
#[inline(always)]
pub fn learn(vni: u32, seg: &GwSegment, ip: u32, mac: &FdbKey, vtep: u32) {
    // Only addresses of the segment's own CIDR (raw, network-order words: the mask is
    // the host-order mask byte-swapped the same way).
    let mask = match seg.prefix_len {
        0 => 0,
        n if n >= 32 => u32::MAX,
        n => (u32::MAX << (32 - n)).to_be(),
    };
    if ip == 0
        || ip == seg.gw_ip
        || ip & mask != seg.gw_ip & mask
        || martian(ip)
        || eth::is_group(mac)
        || eth::bits(mac) == 0
        || eth::is_gateway_range(mac)
    {
        return;
    }
    let key = NbrKey { vni, ip };
    // SAFETY: only tested for presence.
    if unsafe { maps::jn_gw_nbr.get(key) }.is_some() {
        return;
    }
    // SAFETY: copied at once.
    if let Some(old) = unsafe { maps::jn_gw_snoop.get(key) }.copied()
        && eth::bits(&old.mac) == eth::bits(mac)
        && old.vtep == vtep
    {
        return;
    }
    let entry = NbrEntry {
        mac: *mac,
        vtep,
        flags: NBR_SNOOPED,
    };
    if maps::jn_gw_snoop.insert(key, entry, 0).is_ok() {
        crate::stats::gw(GwStat::Snooped);
    }
}

/// ARP arriving from another Node on a gateway segment. False when `vni` is not one.
#[inline(always)]
pub fn from_overlay(ctx: &TcContext, vni: u32, vtep: u32) -> bool {
    // SAFETY: copied at once.
    let Some(seg) = (unsafe { maps::jn_gw_seg.get(vni) }).copied() else {
        return false;
    };
    if let Some((ip, mac)) = sender(ctx) {
        learn(vni, &seg, ip, &mac, vtep);
    }
    true
}
