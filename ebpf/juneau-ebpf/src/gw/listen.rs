//! Nodes without a port of a gateway segment still route to it (L2-18, ★): their
//! routers learn the hosts Juneau did not address from a copy of each broadcast ARP
//! packet of the segment (`jn_gw_listen`, by the sender's segment slot: every Node with
//! endpoints but no port of the segment). The receiving Node snoops the sender and
//! drops the frame (`ROUTER_LISTENED`): it has no port to switch it to.
use core::ffi::c_void;

use aya_ebpf::{bindings::__sk_buff, helpers::bpf_loop, programs::TcContext};
use juneau_common::{DropReason, RemoteList, l2::MAX_REMOTE_VTEPS};

use crate::{maps, overlay, stats};

#[repr(C)]
struct Copies {
    skb: *mut __sk_buff,
    list: *const RemoteList,
    vni: u32,
    pad: u32,
}

/// One clone of the frame to every listening Node of segment `slot`.
#[inline(always)]
pub fn copies(ctx: &TcContext, slot: u32, vni: u32) {
    let Some(list) = maps::jn_gw_listen.get_ptr(slot) else {
        return;
    };
    let mut state = Copies {
        skb: ctx.skb.skb,
        list,
        vni,
        pad: 0,
    };
    // SAFETY: the array value outlives the program's run; the callback matches
    // bpf_loop's signature and reads only `state`.
    unsafe {
        let n = (*list).count.min(MAX_REMOTE_VTEPS as u32);
        if n > 0 {
            bpf_loop(n, one as *mut c_void, (&mut state as *mut Copies).cast(), 0);
        }
    }
}

extern "C" fn one(index: u32, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the pointer given above.
    let state = unsafe { &*(ctx as *const Copies) };
    let i = index as usize;
    if i >= MAX_REMOTE_VTEPS {
        return 1;
    }
    // SAFETY: `list` points into an array map value; `i` is bounds-checked.
    let vtep = unsafe { (*state.list).vteps[i] };
    if vtep != 0
        && let Err(reason) = overlay::send_skb(state.skb, state.vni, vtep, true)
    {
        stats::drop(reason);
    }
    0
}

/// An ARP packet of a segment this Node has no port of: learned if the segment is a
/// gateway segment, then dropped under a name that says why it came.
#[inline(always)]
pub fn heard(ctx: &TcContext, vni: u32, vtep: u32) -> DropReason {
    if super::snoop::from_overlay(ctx, vni, vtep) {
        DropReason::RouterListened
    } else {
        DropReason::UnknownVni
    }
}
