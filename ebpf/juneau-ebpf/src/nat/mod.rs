//! A NATGateway's NAPT (NAT-01), on every Node, with no gateway Pod: a connection routed
//! `via natGateway` leaves the Node it starts on, its source translated to that Node's
//! address on the NATGateway's ExternalNetwork; its replies come back to that Node's
//! uplink and are given the client back there.
//!
//! ```text
//! gw_forward: policy, the route ROUTE_NAT_GW, TTL -> tail: nat_out (enter)
//! nat_out:    the Node's FIB (a way out?), the mapping (the entry's, or a port
//!             claimed for a new connection), the source rewritten, the hop
//! eip_uplink: a ZONE_HOST entry REPLY|NAT for the packet -> reply::to_client
//!             (an ICMP error quoting one: its quote given the client back, error)
//! ```
//!
//! One connection table: the original direction is the entry of `(client zone,
//! client -> server)` (policy's, when policy made one, given the mapping in place), the
//! reply an entry in `ZONE_HOST` keyed `(server, nat address, server port, nat port)`.
//! That entry, inserted with `BPF_NOEXIST`, is the port's claim: no lock.
mod error;
pub mod fast;
pub mod out;
pub mod reply;

use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, tail::TAIL_NAT_OUT};

use crate::tail;

/// From `gw_forward`, for a route via a NATGateway whose address on this Node is
/// `nat_ip` (the port the packet came by is `ifindex`): the call does not return on
/// success.
#[inline(always)]
pub fn enter(ctx: &TcContext, ifindex: u32, nat_ip: u32) -> Result<i32, DropReason> {
    if nat_ip == 0 {
        return Err(DropReason::NatNoAddress);
    }
    // SAFETY: the context pointer is valid for the program's run; cb is scratch space
    // the program owns.
    unsafe {
        (*ctx.skb.skb).cb[0] = ifindex;
        (*ctx.skb.skb).cb[1] = nat_ip;
    }
    tail::call(ctx, TAIL_NAT_OUT);
    Err(DropReason::NoRouter)
}
