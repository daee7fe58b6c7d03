//! Drop accounting: every discarded frame or copy is counted under its reason.
use juneau_common::DropReason;

use crate::maps::jn_drops;

#[inline(always)]
pub fn count(reason: DropReason) {
    if let Some(slot) = jn_drops.get_ptr_mut(reason as u32) {
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        unsafe { *slot += 1 };
    }
}
