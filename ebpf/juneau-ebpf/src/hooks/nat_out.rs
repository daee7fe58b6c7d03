//! `nat_out`, entered by a tail call from `gw_forward` for a route via a NATGateway
//! (NAPT, NAT-01) or the internet gateway of a NIC with an ElasticIP attached (1:1,
//! NAT-03): the way out, else the answer to a refusal.
//!
//! ```text
//! cb::ToNatOut (port, address, mode)
//!   -> nat::out::translate: FIB, mapping (claimed in the connection table) or 1:1,
//!      rewrite, hop -> redirect / redirect_neigh
//!   -> refused (no route, no port, unmappable) or too big with DF:
//!      icmp::error from the segment's gateway (a RST for TCP), back to the sender
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, GwSegment, PortConfig};

use crate::{
    icmp::{self, IcmpError},
    ipv4, maps, nat,
};

/// The program: a connection refused here (no way out, no port free, nothing NAPT
/// can map) is told so at once by an ICMP error from the segment's gateway (a TCP
/// reset for TCP), counted under its reason, rather than left to time out (NAT-02); a
/// packet too big for the way out with DF set gets fragmentation needed with that
/// MTU (path MTU discovery through the gateway).
#[inline(always)]
pub fn run(ctx: &TcContext) -> Result<i32, DropReason> {
    let kind = match nat::out::translate(ctx) {
        Err(
            reason @ (DropReason::NatPortExhausted
            | DropReason::NatNoRoute
            | DropReason::NatUnmappable),
        ) => IcmpError::Refused(reason),
        // `translate` left the way out's MTU in the control block.
        Err(DropReason::FragNeeded) => IcmpError::FragNeeded(crate::cb::mtu(ctx)),
        done => return done,
    };
    answer(ctx, kind)
}

/// The ICMP error (or reset) for the packet as it came, back to its sender's port.
#[inline(always)]
fn answer(ctx: &TcContext, kind: IcmpError) -> Result<i32, DropReason> {
    let reason = match kind {
        IcmpError::Refused(reason) => reason,
        _ => DropReason::FragNeeded,
    };
    let ifindex = crate::cb::ToNatOut::ifindex(ctx);
    // SAFETY: array and hash values, copied at once.
    let port: PortConfig = maps::jn_l2_port.get(ifindex).copied().ok_or(reason)?;
    let seg: GwSegment = unsafe { maps::jn_gw_seg.get(port.vni) }
        .copied()
        .ok_or(reason)?;
    let ip = ipv4::read(ctx).map_err(|_| reason)?;
    icmp::error(ctx, ifindex, &port, &seg, &ip, kind)
}
