//! The stages of a direct ElasticIP NIC's port (EIP-08, EIP-13, EIP-16); its program
//! is `hooks/eip_port.rs`.
use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{DropReason, EipEntry, PortConfig, eip::NIC_GATEWAY};

use super::carry;
use crate::{
    arp::{self, ARP_ETH_IP4},
    deliver::to_port,
    eth, ipv4, maps,
};

/// A request for 169.254.0.1 is answered with the gateway MAC, back into the Pod; a
/// reply about the NIC's own address goes to the Node (whose stack asked, for the
/// Node route of eth0's probes); nothing else.
#[inline(always)]
pub fn from_nic_arp(ctx: &TcContext, ifindex: u32, port: &PortConfig) -> Result<i32, DropReason> {
    let a = arp::read(ctx)?;
    if a.head != ARP_ETH_IP4 {
        return Err(DropReason::ArpFiltered);
    }
    if a.sender_mac != eth::bits(&port.own_mac) {
        return Err(DropReason::SourceGuard);
    }
    let mine = a.sender_ip == port.own_ip;
    if a.op == 1 && a.target_ip == NIC_GATEWAY && (mine || a.sender_ip == 0) {
        arp::reply(ctx, eth::bits(&port.gw_mac), NIC_GATEWAY)?;
        return to_port(ctx, ifindex, port.flags);
    }
    if a.op == 2 && mine {
        return Ok(TC_ACT_OK);
    }
    Err(DropReason::ArpFiltered)
}

#[inline(always)]
pub fn from_nic_ipv4(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    addrs: &eth::Addrs,
) -> Result<i32, DropReason> {
    let ip = ipv4::read(ctx)?;
    if ip.saddr != port.own_ip {
        return Err(DropReason::SourceGuard);
    }
    // Unicast to somewhere only: no broadcast or multicast reaches the Node's own
    // listeners, and 169.254/16 (the gateway included) is nobody's.
    if ipv4::martian(ip.daddr)
        || ip.daddr as u16 == u16::from_ne_bytes([169, 254])
        || eth::is_group(&addrs.dst)
    {
        return Err(DropReason::NotRoutable);
    }
    // SAFETY: copied at once.
    let direct: Option<EipEntry> = unsafe { maps::jn_eip_direct.get(ip.daddr) }.copied();
    match direct {
        // Another direct ElasticIP: turned around here (EIP-13, EIP-14), unless only
        // another Node announces its range: then the upstream delivers it (EIP-14).
        Some(entry) if !super::pools::elsewhere(ip.daddr) => carry::to_holder(ctx, &entry, ip.ttl),
        // Anywhere else by the Node's routing table (its own addresses to its stack).
        _ => super::fib::to_outside(ctx, ifindex, &ip),
    }
}
