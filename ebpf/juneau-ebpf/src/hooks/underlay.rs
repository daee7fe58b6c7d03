//! TCX ingress of the Node's underlay NIC (`underlay_ingress`); the program it enters
//! by tail call for ElasticIPs is `eip_uplink` (`uplink.rs`). Everything it does not
//! take passes to the Node's stack untouched.
//!
//! ```text
//! untagged ARP, or IPv4 that is no VXLAN to this Node -> tail: eip_uplink
//! VXLAN for a local Pod, checked as IP receive would (overlay::decap),
//!   else the stack and the VXLAN device
//! learn the inner source behind its VTEP (l2::learn, handed to decap)
//! strip the 50 bytes, deliver::to_port
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, NodeConfig};

use crate::{
    arp::ETH_P_ARP,
    eip,
    eth::{self, ETH_P_IP},
    l2::learn,
    maps,
    overlay::decap,
};

#[inline(always)]
pub fn ingress(ctx: &TcContext) -> Result<i32, DropReason> {
    // Read once: the ElasticIP branch and the VXLAN checks both need it.
    let node: Option<NodeConfig> = maps::jn_node.get(0).copied();
    let local_vtep = node.map_or(0, |n| n.local_vtep);
    // ARP and IPv4 other than VXLAN: ElasticIPs' (which pass the rest to the stack).
    // SAFETY: the context pointer is valid for the program's run.
    if unsafe { (*ctx.skb.skb).vlan_present } == 0
        && !decap::vxlan_like(ctx, local_vtep)
        && let Some(ETH_P_ARP | ETH_P_IP) = eth::ethertype(ctx)
    {
        return eip::enter_uplink(ctx);
    }
    let own_vtep = match node {
        Some(n) if n.own_encap() => n.local_vtep,
        _ => 0,
    };
    decap::to_local_port(ctx, own_vtep, learn::learn_remote)
}
