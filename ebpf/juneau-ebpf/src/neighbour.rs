//! One hop to a neighbour, shared by every stage that routes a packet itself: the
//! router (`gw::route::forward`), the ElasticIP carry (`eip::carry`) and the NATGateway
//! reply (`nat::reply`). A hop is TTL - 1 and the two MACs; where the neighbour is,
//! its segment's learning table says first.
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, FdbEntry, FdbKey};

use crate::{
    eth::{self, store},
    ipv4, maps,
};

/// Writes `dst` then `src` as the frame's MACs.
///
/// # Safety
/// `[start, start + ETH_HLEN)` must be inside the packet.
#[inline(always)]
pub unsafe fn write_macs(start: usize, dst: &FdbKey, src: &FdbKey) {
    // SAFETY: the caller's bounds; the 8-byte store of the destination runs into the
    // source, which is written next.
    unsafe {
        store::<u64>(start, eth::bits(dst));
        store::<u32>(start + 6, eth::bits(src) as u32);
        store::<u16>(start + 10, (eth::bits(src) >> 32) as u16);
    }
}

/// TTL - 1 and the MACs of the hop to `dst` from `src`. The caller saw a TTL above 1.
#[inline(always)]
pub fn hop(ctx: &TcContext, dst: &FdbKey, src: &FdbKey) -> Result<(), DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ipv4::IP_END > end {
        return Err(DropReason::BadIpHeader);
    }
    // SAFETY: inside [start, start + IP_END), checked above; the TTL is above 1.
    unsafe {
        ipv4::decrement_ttl(start);
        write_macs(start, dst, src);
    }
    Ok(())
}

/// The slot of segment `vni`'s learning table on this Node, when it has a port on it.
#[inline(always)]
pub fn segment_slot(vni: u32) -> Option<u32> {
    // SAFETY: copied at once.
    unsafe { maps::jn_l2_vni.get(vni) }.copied()
}

/// Where the table of segment `slot` last heard `mac`: a local port or another Node.
#[inline(always)]
pub fn learned(slot: Option<u32>, mac: FdbKey) -> Option<FdbEntry> {
    let fdb = maps::jn_l2_fdb.get(slot?)?;
    let entry = fdb.get_ptr(mac)?;
    // SAFETY: copied out at once.
    Some(unsafe { *entry })
}
