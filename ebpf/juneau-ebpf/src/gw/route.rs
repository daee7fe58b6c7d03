//! IPv4 between the segments of a Vpc, the router's stages (its programs are
//! `hooks/router.rs` and `hooks/forward.rs`). Routed once, on the sender's Node: the
//! destination segment's route gives its VNI, gateway MAC and MTU, the neighbour table
//! the destination's MAC and Node; the frame leaves with the destination segment's
//! gateway MAC as source and its VNI on the overlay (one TTL decrement end to end), and
//! the receiving Node only switches it.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason, GwSegment, NbrEntry, PortConfig, RouteEntry, gw::GwStat, svc::SVC_SOURCE_MAC,
    tail::TAIL_SVC_HOST,
};

use crate::{
    deliver::to_port,
    eth::{self, load},
    icmp,
    ipv4::{self, Ipv4},
    neighbour, overlay,
};

const IPPROTO_ICMP: u8 = 1;

/// One hop: TTL - 1 (checksum updated), the destination segment's gateway as source,
/// the neighbour as destination, then switched in the destination segment. Without
/// `hop` (within a Subnet) only the destination MAC is written. The hook gives the
/// last resorts of other features: whether a VNI is the Services' provider segment
/// (`provider`, for a reply to this Node's Service source address) and the flood to
/// a segment's local ports (`flood(slot, vni)`, for a neighbour not heard yet).
#[inline(always)]
pub fn forward(
    ctx: &TcContext,
    route: &RouteEntry,
    nbr: &NbrEntry,
    hop: bool,
    provider: impl FnOnce(u32) -> bool,
    flood: impl FnOnce(u32, u32) -> Result<i32, DropReason>,
) -> Result<i32, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ipv4::IP_END > end {
        return Err(DropReason::BadIpHeader);
    }
    let dst = nbr.mac;
    // SAFETY: inside [start, start + ipv4::IP_END), checked above.
    let src = unsafe {
        let src = if hop {
            ipv4::decrement_ttl(start);
            juneau_common::FdbKey::new(route.gw_mac)
        } else {
            eth::from_bits(load::<u32>(start + 6) as u64 | (load::<u16>(start + 10) as u64) << 32)
        };
        neighbour::write_macs(start, &dst, &src);
        src
    };
    crate::stats::gw(GwStat::Routed);
    let addrs = eth::Addrs { dst, src };
    // The destination segment's table, when this Node has a port on it: the freshest
    // place of the MAC (a Pod here, or where it was last heard).
    let slot = neighbour::segment_slot(route.vni);
    if let Some(entry) = neighbour::learned(slot, dst) {
        if entry.vtep != 0 {
            return overlay::unicast(ctx, route.vni, entry.vtep, &addrs);
        }
        if entry.ifindex != 0 {
            return to_port(ctx, entry.ifindex, entry.flags);
        }
    }
    // Not heard yet: the neighbour's Node, from the endpoint Juneau wrote (L2-18: the
    // first packet reaches a Pod that never spoke).
    let local = overlay::local_vtep();
    if nbr.vtep != 0 && nbr.vtep != local {
        return overlay::unicast(ctx, route.vni, nbr.vtep, &addrs);
    }
    // This Node's Service source address (SVC-02): a provider Pod's reply to a
    // client of another Vpc, given its client back by `svc_host`.
    if eth::bits(&dst) == eth::bits(&juneau_common::FdbKey::new(SVC_SOURCE_MAC)) {
        if !provider(route.vni) {
            return Err(DropReason::NotAReply);
        }
        crate::tail::call(ctx, TAIL_SVC_HOST);
        return Err(DropReason::NoDeliveryProgram);
    }
    match slot {
        // Here but silent: every local port of the segment gets it (only its owner
        // takes a frame to its MAC). A Subnet's ports are routed and pinned, never
        // flooded: its neighbour is gone when the table does not have it.
        Some(slot) => flood(slot, route.vni).map_err(|r| {
            if r == DropReason::NoOtherPort {
                DropReason::NoNeighbour
            } else {
                r
            }
        }),
        None => Err(DropReason::NoNeighbour),
    }
}

/// A packet to a gateway address: echo requests are answered, anything else refused.
#[inline(always)]
pub fn to_router(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
    ip: &Ipv4,
) -> Result<i32, DropReason> {
    if ip.proto != IPPROTO_ICMP {
        return Err(DropReason::NotForRouter);
    }
    icmp::echo_reply(ctx, ifindex, port, seg)
}
