//! Entering a program of the one tail-call table (`jn_progs`, slots in
//! `juneau_common::tail`).
use aya_ebpf::programs::TcContext;

use crate::maps;

/// Jumps to the program in `slot`; returns only when the slot is empty (the caller
/// says what that means for the frame).
#[inline(always)]
pub fn call(ctx: &TcContext, slot: u32) {
    // SAFETY: the map and the context are valid; on success control never returns.
    unsafe { maps::jn_progs.tail_call(ctx, slot) };
}
