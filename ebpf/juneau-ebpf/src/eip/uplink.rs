//! The uplink's side of ElasticIPs: ARP for the advertised ones (EIP-11). IPv4 to them
//! is `eip_uplink`'s (`hooks/uplink.rs`): carried to a direct holder (`carry`), or
//! 1:1 to the NIC an ElasticIP is attached to (`nat::one`).
use aya_ebpf::{bindings::TC_ACT_OK, helpers::bpf_redirect, programs::TcContext};
use juneau_common::{DropReason, ExtArp};

use crate::{
    arp::{self, ARP_ETH_IP4},
    eth, maps,
};

/// Only this Node answers for what it advertises; requests for anything else are the
/// stack's (its own addresses). A gratuitous request (sender = target: another Node
/// announcing that it answers now) is an announcement, not a question: a Node that has
/// not yet let the address go would otherwise answer it and pull the neighbours back.
#[inline(always)]
pub fn arp_request(ctx: &TcContext) -> Result<i32, DropReason> {
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
