//! `eip_port`, the ingress program of a direct ElasticIP NIC's veth (and entered from
//! `port_ingress` by a tail call in test runs).
//!
//! ```text
//! port = jn_l2_port[ifindex], an ElasticIP NIC's        NOT_A_PORT
//! no VLAN, its own MAC                                  EIP_NOT_IPV4, SOURCE_GUARD
//! ARP -> eip::port::from_nic_arp (169.254.0.1 answered)
//! IPv4 -> eip::port::from_nic_ipv4 (the source guard; to another ElasticIP: carried,
//!   else out by the Node's routing table)
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason, PortConfig,
    port::{PORT_ACTIVE, PORT_EIP},
};

use crate::{arp::ETH_P_ARP, eip, eth, maps};

#[inline(always)]
pub fn run(ctx: &TcContext) -> Result<i32, DropReason> {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    // SAFETY: array value, copied at once.
    let port: PortConfig = unsafe {
        *maps::jn_l2_port
            .get_ptr(ifindex)
            .ok_or(DropReason::NotAPort)?
    };
    // Attached directly to the NIC's veth (no `port_ingress` before it): a port not
    // (or no longer) written is none.
    if port.flags & (PORT_ACTIVE | PORT_EIP) != PORT_ACTIVE | PORT_EIP {
        return Err(DropReason::NotAPort);
    }
    // A VLAN tag the kernel moved into the skb's metadata: not plain IPv4.
    // SAFETY: as above.
    if unsafe { (*ctx.skb.skb).vlan_present } != 0 {
        return Err(DropReason::EipNotIpv4);
    }
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    if eth::bits(&addrs.src) != eth::bits(&port.own_mac) {
        return Err(DropReason::SourceGuard);
    }
    match eth::ethertype(ctx) {
        Some(ETH_P_ARP) => eip::port::from_nic_arp(ctx, ifindex, &port),
        Some(eth::ETH_P_IP) => eip::port::from_nic_ipv4(ctx, ifindex, &port, &addrs),
        _ => Err(DropReason::EipNotIpv4),
    }
}
