//! Broadcast, multicast and unknown unicast: one copy to every other local port of the
//! segment (L2-28), never back to the ingress port. `bpf_loop` walks the segment's port
//! array, so the cost follows the number of ports, not the map's size, and the verifier
//! checks the body once.
use core::ffi::c_void;

use aya_ebpf::{bindings::__sk_buff, helpers::bpf_loop, programs::TcContext};
use juneau_common::{DropReason, FloodList, l2::MAX_FLOOD_PORTS};

use crate::{drop, maps};

/// State shared with the loop body. Copies are sent one step late: the last eligible
/// port gets the original frame by redirect instead of a clone.
#[repr(C)]
struct FloodCtx {
    skb: *mut __sk_buff,
    list: *const FloodList,
    ingress: u32,
    pending: u32,
    pending_flags: u32,
    pad: u32,
}

#[inline(always)]
pub fn flood(ctx: &TcContext, segment: u32, ingress: u32) -> Result<i32, DropReason> {
    let list = maps::jn_l2_flood
        .get_ptr(segment)
        .ok_or(DropReason::NoSegment)?;
    // SAFETY: array value pointer valid for the program's run.
    let count = unsafe { (*list).count };
    let mut state = FloodCtx {
        skb: ctx.skb.skb,
        list,
        ingress,
        pending: 0,
        pending_flags: 0,
        pad: 0,
    };
    let n = if count as usize > MAX_FLOOD_PORTS {
        MAX_FLOOD_PORTS as u32
    } else {
        count
    };
    // SAFETY: the callback matches bpf_loop's signature and only reads `state`.
    unsafe {
        bpf_loop(
            n,
            flood_one as *mut c_void,
            (&mut state as *mut FloodCtx).cast(),
            0,
        );
    }
    if state.pending == 0 {
        return Err(DropReason::NoOtherPort);
    }
    Ok(super::deliver(state.pending, state.pending_flags))
}

extern "C" fn flood_one(index: u32, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the pointer given above.
    let state = unsafe { &mut *(ctx as *mut FloodCtx) };
    let i = index as usize;
    if i >= MAX_FLOOD_PORTS {
        return 1;
    }
    // SAFETY: `list` points into an array map value; `i` is bounds-checked.
    let port = unsafe { (*state.list).ports[i] };
    if port.ifindex == 0 || port.ifindex == state.ingress {
        return 0;
    }
    if state.pending != 0 {
        // SAFETY: the skb pointer is the program's context.
        let rc = unsafe { aya_ebpf::helpers::bpf_clone_redirect(state.skb, state.pending, 0) };
        if rc != 0 {
            drop::count(DropReason::CloneFailed);
        }
    }
    state.pending = port.ifindex;
    state.pending_flags = port.flags;
    0
}
