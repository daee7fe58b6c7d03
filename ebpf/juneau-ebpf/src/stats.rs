//! The datapath's counters: every discarded frame or copy under its reason
//! (`jn_drops`), and the router's per-CPU statistics (`jn_gw_stats`).
use juneau_common::{DropReason, gw::GwStat};

use crate::maps::{jn_drops, jn_gw_stats};

/// One frame or copy discarded for `reason`.
#[inline(always)]
pub fn drop(reason: DropReason) {
    if let Some(slot) = jn_drops.get_ptr_mut(reason as u32) {
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        unsafe { *slot += 1 };
    }
}

/// One more of the router's `stat`.
#[inline(always)]
pub fn gw(stat: GwStat) {
    if let Some(slot) = jn_gw_stats.get_ptr_mut(stat as u32) {
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        unsafe { *slot += 1 };
    }
}
