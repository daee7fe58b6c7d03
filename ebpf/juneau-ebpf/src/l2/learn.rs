//! Source learning (L2-28, L2-29): the datapath alone writes the tables. Learning never
//! decides a frame's fate: a source that cannot be learned (a group or all-zero MAC)
//! is skipped, and a table that refuses an update is counted (`LEARN_FAILED`) while the
//! frame is forwarded all the same.
use aya_ebpf::helpers::{bpf_jiffies64, bpf_ktime_get_coarse_ns};
use juneau_common::{
    DropReason, FdbEntry, FdbKey, PortConfig,
    l2::{LEARN_CACHE_JIFFIES, LEARN_REFRESH_NS},
};

use crate::{
    eth,
    maps::{self, Fdb},
};

/// A source no frame may teach: group (broadcast, multicast) and all-zero addresses.
#[inline(always)]
fn unlearnable(src: &FdbKey) -> bool {
    eth::is_group(src) || eth::bits(src) == 0
}

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
pub fn learn_local(port: &mut PortConfig, ifindex: u32, fdb: &Fdb, src: &FdbKey) {
    if unlearnable(src) {
        // Never a valid source: forward the frame, learn nothing.
        return;
    }
    // SAFETY: plain helper call (inlined by the verifier).
    let jiffies = unsafe { bpf_jiffies64() };
    if eth::bits(&port.cache_mac) == eth::bits(src)
        && jiffies.wrapping_sub(port.cache_jiffies) < LEARN_CACHE_JIFFIES
    {
        return;
    }
    if learn(fdb, src, ifindex, 0, port.flags, now()) {
        port.cache_mac = *src;
        port.cache_jiffies = jiffies;
    }
}

/// Bind `src` to the remote VTEP it came from.
#[inline(always)]
pub fn learn_remote(fdb: &Fdb, src: &FdbKey, vtep: u32) {
    // Routed frames carry the destination segment's gateway MAC as source: the gateway
    // is on every Node and never behind one (L2-29).
    if !unlearnable(src) && !eth::is_gateway_range(src) {
        learn(fdb, src, 0, vtep, 0, now());
    }
}

/// Refresh an entry in place (at most once per [`LEARN_REFRESH_NS`]), or overwrite it
/// when the MAC moved (followed at its first frame from the new place; the old port's
/// cache is cleared so that a move back is followed at once too). False when the table
/// refused the update (counted; the frame goes on).
#[inline(always)]
fn learn(fdb: &Fdb, src: &FdbKey, ifindex: u32, vtep: u32, flags: u32, now: u64) -> bool {
    if let Some(entry) = fdb.get_ptr_mut(src) {
        // SAFETY: the entry pointer is used immediately; a concurrent delete and reuse at worst
        // refreshes the wrong entry's timestamp once.
        let (old_ifindex, old_vtep, seen, old_flags) = unsafe {
            (
                (*entry).ifindex,
                (*entry).vtep,
                (*entry).last_seen_ns,
                (*entry).flags,
            )
        };
        if old_flags & juneau_common::port::PORT_ROUTED != 0 {
            // A routed port's own MAC, written with the port: no frame moves it.
            return true;
        }
        if old_ifindex == ifindex && old_vtep == vtep {
            if now.wrapping_sub(seen) >= LEARN_REFRESH_NS {
                // SAFETY: as above.
                unsafe { (*entry).last_seen_ns = now };
            }
            return true;
        }
        if old_ifindex != 0
            && let Some(old_port) = maps::jn_l2_port.get_ptr_mut(old_ifindex)
        {
            // SAFETY: array value; only the cache timestamp is written.
            unsafe { (*old_port).cache_jiffies = 0 };
        }
    }
    let entry = FdbEntry {
        ifindex,
        vtep,
        last_seen_ns: now,
        flags,
        pad: 0,
    };
    if fdb.insert(src, entry, 0).is_err() {
        crate::stats::drop(DropReason::LearnFailed);
        return false;
    }
    true
}
