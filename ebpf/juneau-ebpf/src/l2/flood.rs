//! Broadcast, multicast and unknown unicast: one copy to every other port of the
//! segment (L2-28): local ports first, then (for frames from a local port) every other
//! Node hosting the segment. Never back to the ingress port; never back into the
//! overlay for a frame that came from it (split horizon).
//!
//! `bpf_loop` walks the per-segment arrays, so the cost follows the number of ports,
//! not a map's size, and the verifier checks each body once. Copies are sent one step
//! late: the last target gets the original frame by redirect instead of a clone.
use core::ffi::c_void;

use aya_ebpf::{
    bindings::__sk_buff,
    helpers::{bpf_clone_redirect, bpf_loop},
    programs::TcContext,
};
use juneau_common::{
    DropReason, FloodList, RemoteList,
    l2::{MAX_FLOOD_PORTS, MAX_REMOTE_VTEPS},
    port::PORT_ROUTED,
};

use crate::{deliver::to_port, maps, overlay, stats};

/// State shared with the loop bodies: the one target not yet sent to.
#[repr(C)]
struct FloodCtx {
    skb: *mut __sk_buff,
    locals: *const FloodList,
    remotes: *const RemoteList,
    // Zero and non-zero fields alternate on purpose: LLVM turns 16 contiguous zero
    // bytes into a call to a memset subprogram (one more call per flooded frame, and
    // one more function for the verifier); 8 become one store.
    ingress: u32,
    /// Pending local port (0: none) and its flags.
    pending_port: u32,
    vni: u32,
    pending_flags: u32,
    /// Pending remote VTEP (0: none).
    pending_vtep: u32,
    /// Clones sent.
    sent: u32,
}

impl FloodCtx {
    /// Send a clone to the pending local port, if any.
    #[inline(always)]
    fn flush_local(&mut self) {
        if self.pending_port != 0 {
            // SAFETY: the skb pointer is the program's context.
            if unsafe { bpf_clone_redirect(self.skb, self.pending_port, 0) } != 0 {
                stats::drop(DropReason::CloneFailed);
            }
            self.sent += 1;
            self.pending_port = 0;
        }
    }

    /// Send a clone to the pending remote VTEP, if any. The pending local port is
    /// flushed before the remote loop starts, so each loop body carries only its own
    /// send path (a smaller program for the verifier).
    #[inline(always)]
    fn flush_remote(&mut self) {
        if self.pending_vtep != 0 {
            if let Err(reason) = overlay::send_skb(self.skb, self.vni, self.pending_vtep, true) {
                stats::drop(reason);
            }
            self.sent += 1;
            self.pending_vtep = 0;
        }
    }
}

#[inline(always)]
pub fn flood(
    ctx: &TcContext,
    segment: u32,
    vni: u32,
    ingress: u32,
    to_remotes: bool,
) -> Result<i32, DropReason> {
    let locals = maps::jn_l2_flood
        .get_ptr(segment)
        .ok_or(DropReason::NoSegment)?;
    let remotes = maps::jn_l2_remote
        .get_ptr(segment)
        .ok_or(DropReason::NoSegment)?;
    let mut state = FloodCtx {
        skb: ctx.skb.skb,
        locals,
        remotes,
        ingress,
        vni,
        pending_port: 0,
        pending_flags: 0,
        pending_vtep: 0,
        sent: 0,
    };
    // SAFETY: array value pointers valid for the program's run; callbacks match
    // bpf_loop's signature and only touch `state`.
    unsafe {
        let n = (*locals).count.min(MAX_FLOOD_PORTS as u32);
        bpf_loop(
            n,
            local_one as *mut c_void,
            (&mut state as *mut FloodCtx).cast(),
            0,
        );
        let n = (*remotes).count.min(MAX_REMOTE_VTEPS as u32);
        if to_remotes && n > 0 {
            // Every local copy leaves before the first tunnel key is set.
            state.flush_local();
            bpf_loop(
                n,
                remote_one as *mut c_void,
                (&mut state as *mut FloodCtx).cast(),
                0,
            );
        }
    }
    if state.pending_port != 0 {
        return to_port(ctx, state.pending_port, state.pending_flags);
    }
    if state.pending_vtep != 0 {
        return overlay::send(ctx, vni, state.pending_vtep, false);
    }
    if state.sent != 0 {
        // Every copy left as a clone; the original has nowhere else to go.
        return Ok(aya_ebpf::bindings::TC_ACT_SHOT);
    }
    Err(DropReason::NoOtherPort)
}

extern "C" fn local_one(index: u32, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the pointer given above.
    let state = unsafe { &mut *(ctx as *mut FloodCtx) };
    let i = index as usize;
    if i >= MAX_FLOOD_PORTS {
        return 1;
    }
    // SAFETY: `locals` points into an array map value; `i` is bounds-checked.
    let port = unsafe { (*state.locals).ports[i] };
    // A routed port (a Subnet NIC) takes only frames to its own MAC, routed or
    // switched by its pinned entry: its Pod speaks to the router alone.
    if port.ifindex == 0 || port.ifindex == state.ingress || port.flags & PORT_ROUTED != 0 {
        return 0;
    }
    state.flush_local();
    state.pending_port = port.ifindex;
    state.pending_flags = port.flags;
    0
}

extern "C" fn remote_one(index: u32, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the pointer given above.
    let state = unsafe { &mut *(ctx as *mut FloodCtx) };
    let i = index as usize;
    if i >= MAX_REMOTE_VTEPS {
        return 1;
    }
    // SAFETY: `remotes` points into an array map value; `i` is bounds-checked.
    let vtep = unsafe { (*state.remotes).vteps[i] };
    if vtep == 0 {
        return 0;
    }
    state.flush_remote();
    state.pending_vtep = vtep;
    0
}
