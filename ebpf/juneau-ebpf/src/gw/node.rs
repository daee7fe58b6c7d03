//! The Node's door into the default Subnet (kubelet probes): the Node reaches each
//! default-Subnet Pod it hosts by the route `<Pod>/32 dev <host veth> src <Node>` the
//! CNI adds (as for an ElasticIP's eth0, EIP-18); what the Pod sends back to the
//! Node's own address, and its ARP replies to the Node's questions, go to the Node's
//! stack from here, never routed. Only the default Vpc's segment (`SEG_PROVIDER`):
//! other Vpcs may reuse any range, so the Node has no route into them (seed 000).
use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{DropReason, GwSegment, gw::SEG_PROVIDER};

use crate::overlay;

/// PACKET_HOST: a frame for this host (the router's MAC is not the veth's own).
const PACKET_HOST: u32 = 0;

/// `daddr` (network order) is this Node's own address, seen from `seg`.
#[inline(always)]
pub fn is_node(seg: &GwSegment, daddr: u32) -> bool {
    seg.flags & SEG_PROVIDER != 0 && daddr == overlay::local_vtep().to_be()
}

/// To the Node's stack as a frame for it: it came to the router's MAC, which the stack
/// would take for another host's.
#[inline(always)]
pub fn to_stack(ctx: &TcContext) -> Result<i32, DropReason> {
    ctx.change_type(PACKET_HOST)
        .map_err(|_| DropReason::NotRoutable)?;
    Ok(TC_ACT_OK)
}
