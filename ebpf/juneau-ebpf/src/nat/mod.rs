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
//! 1:1 NAT of an ElasticIP attached to a Subnet NIC (NAT-03) shares `nat_out`'s way
//! out, in its own mode (`one.rs`).
//!
//! One connection table: the original direction is the entry of `(client zone,
//! client -> server)` (policy's, when policy made one, given the mapping in place), the
//! reply an entry in `ZONE_HOST` keyed `(server, nat address, server port, nat port)`.
//! That entry, inserted with `BPF_NOEXIST`, is the port's claim: no lock.
pub mod error;
pub mod fast;
pub mod one;
pub mod out;
pub mod reply;

use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, tail::TAIL_NAT_OUT};

use crate::{cb, tail};

/// From `gw_forward`, for a route via a NATGateway whose address on this Node is
/// `nat_ip` (the port the packet came by is `ifindex`): the call does not return on
/// success.
#[inline(always)]
pub fn enter(ctx: &TcContext, ifindex: u32, nat_ip: u32) -> Result<i32, DropReason> {
    if nat_ip == 0 {
        return Err(DropReason::NatNoAddress);
    }
    to_nat_out(ctx, ifindex, nat_ip, cb::NAPT)
}

/// From `gw_forward`, for a route via the internet gateway from a Subnet NIC with
/// ElasticIP `public_ip` attached (NAT-03): the source becomes the ElasticIP, nothing
/// else changes. The call does not return on success.
#[inline(always)]
pub fn enter_one_to_one(ctx: &TcContext, ifindex: u32, public_ip: u32) -> Result<i32, DropReason> {
    to_nat_out(ctx, ifindex, public_ip, cb::ONE_TO_ONE)
}

#[inline(always)]
fn to_nat_out(ctx: &TcContext, ifindex: u32, addr: u32, mode: u32) -> Result<i32, DropReason> {
    cb::ToNatOut {
        ifindex,
        addr,
        mode,
    }
    .put(ctx);
    tail::call(ctx, TAIL_NAT_OUT);
    Err(DropReason::NoRouter)
}
