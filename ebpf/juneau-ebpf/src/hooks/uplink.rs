//! `eip_uplink`, entered by a tail call from `underlay_ingress` for untagged ARP and
//! IPv4 that is no VXLAN to this Node. What it does not take passes to the Node's
//! stack untouched.
//!
//! ```text
//! ARP request for an advertised ElasticIP -> eip::uplink::arp_request (the reply)
//! IPv4 to this Node's MAC -> jn_eip_direct[daddr]:
//!   attached to a Subnet NIC (pod_ip) -> nat::one::inbound (1:1) -> carried to the NIC
//!   held directly                     -> eip::carry::to_holder
//!   none: a NATGateway connection's reply -> nat::reply::to_client,
//!         else in an announced pool (jn_ext_pools) -> EXT_POOL_NO_HOLDER, else the stack
//! ```
use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{DropReason, EipEntry};

use crate::{arp::ETH_P_ARP, eip, eth, ipv4, maps, nat};

/// `skb->pkt_type` of a frame to one of this host's own MACs.
const PACKET_HOST: u32 = 0;

#[inline(always)]
pub fn run(ctx: &TcContext) -> Result<i32, DropReason> {
    match eth::ethertype(ctx) {
        Some(ETH_P_ARP) => eip::uplink::arp_request(ctx),
        Some(eth::ETH_P_IP) => ipv4(ctx),
        _ => Ok(TC_ACT_OK),
    }
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
        Some(entry) if entry.pod_ip != 0 => nat::one::inbound(ctx, &entry, &ip, || {
            eip::carry::to_attached(ctx, &entry, ip.ttl)
        }),
        Some(entry) => eip::carry::to_holder(ctx, &entry, ip.ttl),
        // Not an ElasticIP's: a NATGateway connection's reply; else, in a pool some
        // Node announces, nobody's here (the stack would send it back out: EIP-12);
        // else the stack's.
        None => nat::reply::to_client(ctx, &ip, || {
            if eip::pools::announced(ip.daddr) {
                Err(DropReason::ExtPoolNoHolder)
            } else {
                Ok(TC_ACT_OK)
            }
        }),
    }
}
