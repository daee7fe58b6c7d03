//! Source learning (L2-28, L2-29): the datapath alone writes the tables.
use aya_ebpf::{btf_maps::LruHashMap, helpers::bpf_ktime_get_coarse_ns};
use juneau_common::{
    DropReason, FdbEntry, FdbKey, PortConfig,
    l2::{FDB_ENTRIES, LEARN_REFRESH_NS},
};

use crate::{eth, maps};

type Fdb = LruHashMap<FdbKey, FdbEntry, { FDB_ENTRIES as usize }>;

/// Bind `src` to the port. The common case (the port's own MAC, seen within the last
/// second) is answered by the port's one-entry cache without touching the table; an
/// entry is otherwise refreshed in place, or overwritten when the MAC moved here
/// (followed at the first frame, and the old port's cache is invalidated so a move back
/// is followed at once too).
#[inline(always)]
pub fn learn(
    port: &mut PortConfig,
    ifindex: u32,
    fdb: &Fdb,
    src: &FdbKey,
) -> Result<(), DropReason> {
    if eth::is_group(src) {
        // A group address is never a valid source; forward the frame, learn nothing.
        return Ok(());
    }
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_coarse_ns() };
    if eth::bits(&port.cache_mac) == eth::bits(src)
        && now.wrapping_sub(port.cache_ns) < LEARN_REFRESH_NS
    {
        return Ok(());
    }
    match fdb.get_ptr_mut(src) {
        // SAFETY: the entry pointer is used immediately; a concurrent LRU reuse at worst
        // refreshes the wrong entry's timestamp once.
        Some(entry) if unsafe { (*entry).ifindex == ifindex && (*entry).vtep == 0 } => unsafe {
            (*entry).last_seen_ns = now;
        },
        found => {
            if let Some(old) = found {
                // SAFETY: as above.
                let old_ifindex = unsafe { (*old).ifindex };
                if let Some(old_port) = maps::jn_l2_port.get_ptr_mut(old_ifindex) {
                    // SAFETY: array value; only the cache timestamp is written.
                    unsafe { (*old_port).cache_ns = 0 };
                }
            }
            let entry = FdbEntry {
                ifindex,
                vtep: 0,
                last_seen_ns: now,
                flags: port.flags,
                pad: 0,
            };
            fdb.insert(src, entry, 0)
                .map_err(|_| DropReason::LearnFailed)?;
        }
    }
    port.cache_mac = *src;
    port.cache_ns = now;
    Ok(())
}
