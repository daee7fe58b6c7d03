//! Source learning (L2-28, L2-29): the datapath alone writes the tables.
use aya_ebpf::helpers::{bpf_jiffies64, bpf_ktime_get_coarse_ns};
use juneau_common::{
    DropReason, FdbEntry, FdbKey, PortConfig,
    l2::{LEARN_CACHE_JIFFIES, LEARN_REFRESH_NS},
};

use super::Fdb;
use crate::{eth, maps};

/// The learning clock: CLOCK_MONOTONIC_COARSE. Entries are refreshed at second
/// granularity, which does not need a clocksource read (~25 ns in a VM).
#[inline(always)]
fn now() -> u64 {
    // SAFETY: plain helper call.
    unsafe { bpf_ktime_get_coarse_ns() }
}

/// Bind `src` to a local port. The common case (the port's own MAC, seen within the
/// last [`LEARN_CACHE_JIFFIES`]) is answered by the port's one-entry cache without
/// touching the table or calling a clock helper (jiffies is one inlined load).
#[inline(always)]
pub fn learn_local(
    port: &mut PortConfig,
    ifindex: u32,
    fdb: &Fdb,
    src: &FdbKey,
) -> Result<(), DropReason> {
    if eth::is_group(src) {
        // A group address is never a valid source; forward the frame, learn nothing.
        return Ok(());
    }
    // SAFETY: plain helper call (inlined by the verifier).
    let jiffies = unsafe { bpf_jiffies64() };
    if eth::bits(&port.cache_mac) == eth::bits(src)
        && jiffies.wrapping_sub(port.cache_jiffies) < LEARN_CACHE_JIFFIES
    {
        return Ok(());
    }
    learn(fdb, src, ifindex, 0, port.flags, now())?;
    port.cache_mac = *src;
    port.cache_jiffies = jiffies;
    Ok(())
}

/// Bind `src` to the remote VTEP it came from.
#[inline(always)]
pub fn learn_remote(fdb: &Fdb, src: &FdbKey, vtep: u32) -> Result<(), DropReason> {
    if eth::is_group(src) {
        return Ok(());
    }
    learn(fdb, src, 0, vtep, 0, now())
}

/// Refresh an entry in place (at most once per [`LEARN_REFRESH_NS`]), or overwrite it
/// when the MAC moved (followed at its first frame from the new place; the old port's
/// cache is cleared so that a move back is followed at once too).
#[inline(always)]
fn learn(
    fdb: &Fdb,
    src: &FdbKey,
    ifindex: u32,
    vtep: u32,
    flags: u32,
    now: u64,
) -> Result<(), DropReason> {
    if let Some(entry) = fdb.get_ptr_mut(src) {
        // SAFETY: the entry pointer is used immediately; a concurrent LRU reuse at worst
        // refreshes the wrong entry's timestamp once.
        let (old_ifindex, old_vtep, seen) =
            unsafe { ((*entry).ifindex, (*entry).vtep, (*entry).last_seen_ns) };
        if old_ifindex == ifindex && old_vtep == vtep {
            if now.wrapping_sub(seen) >= LEARN_REFRESH_NS {
                // SAFETY: as above.
                unsafe { (*entry).last_seen_ns = now };
            }
            return Ok(());
        }
        if old_ifindex != 0 {
            if let Some(old_port) = maps::jn_l2_port.get_ptr_mut(old_ifindex) {
                // SAFETY: array value; only the cache timestamp is written.
                unsafe { (*old_port).cache_jiffies = 0 };
            }
        }
    }
    let entry = FdbEntry {
        ifindex,
        vtep,
        last_seen_ns: now,
        flags,
        pad: 0,
    };
    fdb.insert(src, entry, 0)
        .map_err(|_| DropReason::LearnFailed)
}
