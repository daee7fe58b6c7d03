//! ElasticIPs held directly by Pod NICs (seed 003). Two programs, each entered by a
//! tail call so that the hooks they hang off stay as small as they were:
//!
//! - `eip_port` (from `port_ingress` on a port with `PORT_EIP`): what the NIC may send
//!   (EIP-16: IPv4 from its own address, ARP for 169.254.0.1, answered in place, and
//!   replies about its own address) and where it goes (EIP-13: another direct
//!   ElasticIP is turned around here, unless only another Node announces its range
//!   (EIP-14, `pools`); anything else by the Node's routing table (`fib`), the
//!   ElasticIP kept as source).
//! - `eip_uplink` (from `underlay_ingress` for ARP and non-VXLAN IPv4): ARP for the
//!   addresses this Node advertises is answered with the uplink's MAC (EIP-11), IPv4
//!   to a direct ElasticIP is taken to its holder, here or on its Node (EIP-12, a
//!   client's stale ARP cache); an address of an announced pool that nothing here
//!   takes is dropped (`EXT_POOL_NO_HOLDER`); everything else passes to the stack.
pub mod carry;
pub mod fib;
pub mod pools;
pub mod port;
pub mod uplink;

use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{
    DropReason,
    tail::{TAIL_EIP_PORT, TAIL_EIP_UPLINK},
};

use crate::tail;

/// From a direct NIC's port: the call does not return on success.
#[inline(always)]
pub fn enter_port(ctx: &TcContext) -> Result<i32, DropReason> {
    tail::call(ctx, TAIL_EIP_PORT);
    Err(DropReason::NoRouter)
}

/// From the uplink: without the program (an empty slot) the frame passes to the
/// stack, as before ElasticIPs.
#[inline(always)]
pub fn enter_uplink(ctx: &TcContext) -> Result<i32, DropReason> {
    tail::call(ctx, TAIL_EIP_UPLINK);
    Ok(TC_ACT_OK)
}
