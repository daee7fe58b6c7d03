//! Switching by destination MAC: known unicast to its one port (or Node), anything
//! else flooded. Entered from the port and overlay programs after learning, and by the
//! router for the ARP it gives back (so the router depends on this, not on the ports'
//! entry logic).
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, FdbEntry, PortConfig};

use super::flood;
use crate::{
    deliver::to_port,
    eth,
    maps::{self, Fdb},
    overlay,
};

/// A frame from a local port switched as without a gateway (for the router, which
/// takes every ARP packet of a gateway port first and gives back those not for it).
#[inline(always)]
pub fn switch_from_port(
    ctx: &TcContext,
    port: &PortConfig,
    ifindex: u32,
) -> Result<i32, DropReason> {
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    let fdb = maps::jn_l2_fdb
        .get(port.segment)
        .ok_or(DropReason::NoSegment)?;
    forward(ctx, fdb, port.segment, port.vni, ifindex, &addrs, false)
}

/// Known unicast to its one port (or Node); anything else flooded.
#[inline(always)]
pub fn forward(
    ctx: &TcContext,
    fdb: &Fdb,
    segment: u32,
    vni: u32,
    ingress: u32,
    addrs: &eth::Addrs,
    from_overlay: bool,
) -> Result<i32, DropReason> {
    let dst = &addrs.dst;
    if !eth::is_group(dst)
        && let Some(entry) = fdb.get_ptr(dst)
    {
        // SAFETY: copied out at once; a deleted entry may be reused after this point.
        let entry: FdbEntry = unsafe { *entry };
        if entry.vtep != 0 {
            if !from_overlay {
                return overlay::unicast(ctx, vni, entry.vtep, addrs);
            }
            // Learned on another Node but arrived from the overlay: flood locally
            // instead of relaying (no second overlay crossing).
        } else if entry.ifindex == ingress {
            return Err(DropReason::Hairpin);
        } else if entry.ifindex != 0 {
            return to_port(ctx, entry.ifindex, entry.flags);
        }
    }
    flood::flood(ctx, segment, vni, ingress, !from_overlay)
}
