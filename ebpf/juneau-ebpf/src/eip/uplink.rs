//! The uplink's side of ElasticIPs: ARP for the advertised ones (EIP-11) and IPv4 to
//! any direct one (delivered here or carried to its holder's Node), or to one attached
//! to a Subnet NIC (1:1 NAT, then carried the same way).
use aya_ebpf::{bindings::TC_ACT_OK, helpers::bpf_redirect, programs::TcContext};
use juneau_common::{DropReason, EipEntry, ExtArp};

use super::carry;
use crate::{
    arp::{self, ARP_ETH_IP4, ETH_P_ARP},
    eth, ipv4, maps,
};

/// `skb->pkt_type` of a frame to one of this host's own MACs.
const PACKET_HOST: u32 = 0;

#[inline(always)]
pub fn try_uplink(ctx: &TcContext) -> Result<i32, DropReason> {
    match eth::ethertype(ctx) {
        Some(ETH_P_ARP) => arp_request(ctx),
        Some(eth::ETH_P_IP) => ipv4(ctx),
        _ => Ok(TC_ACT_OK),
    }
}

/// Only this Node answers for what it advertises; requests for anything else are the
/// stack's (its own addresses). A gratuitous request (sender = target: another Node
/// announcing that it answers now) is an announcement, not a question: a Node that has
/// not yet let the address go would otherwise answer it and pull the neighbours back.
#[inline(always)]
fn arp_request(ctx: &TcContext) -> Result<i32, DropReason> {
    let Ok(a) = arp::read(ctx) else {
        return Ok(TC_ACT_OK);
    };
    if a.head != ARP_ETH_IP4 || a.op != 1 || a.sender_ip == a.target_ip {
        return Ok(TC_ACT_OK);
    }
    // SAFETY: copied at once.
    let Some(answer): Option<ExtArp> = (unsafe { maps::jn_ext_arp.get(a.target_ip) }).copied()
    else {
        return Ok(TC_ACT_OK);
    };
    arp::reply(ctx, eth::bits(&answer.mac), a.target_ip)?;
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    // SAFETY: plain helper call.
    Ok(unsafe { bpf_redirect(ifindex, 0) } as i32)
}

#[inline(always)]
fn ipv4(ctx: &TcContext) -> Result<i32, DropReason> {
    // Only what was sent to this Node (its uplink MAC, as it answered): a frame for
    // another host that the wire flooded here would be delivered twice.
    // SAFETY: the context pointer is valid for the program's run.
    if unsafe { (*ctx.skb.skb).pkt_type } != PACKET_HOST {
        return Ok(TC_ACT_OK);
    }
    let Ok(ip) = ipv4::read(ctx) else {
        return Ok(TC_ACT_OK);
    };
    // SAFETY: copied at once.
    let direct: Option<EipEntry> = unsafe { maps::jn_eip_direct.get(ip.daddr) }.copied();
    match direct {
        // Attached to a Subnet NIC: 1:1 NAT (NAT-03).
        Some(entry) if entry.pod_ip != 0 => crate::nat::one::inbound(ctx, &entry, &ip),
        Some(entry) => carry::to_holder(ctx, &entry, ip.ttl),
        // Not an ElasticIP's: a NATGateway connection's reply, or the stack's.
        None => crate::nat::reply::to_client(ctx, &ip),
    }
}
