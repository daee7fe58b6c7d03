//! The measurement floor: the least a TC forwarding program can do (one hash lookup by
//! ingress ifindex, one `bpf_redirect`). Benchmarks load it beside the real datapath
//! and report every path as a ratio to it, measured in the same run.
#![no_std]
#![no_main]
#![allow(non_upper_case_globals)]

use aya_ebpf::{
    bindings::TC_ACT_SHOT,
    btf_maps::HashMap,
    helpers::bpf_redirect,
    macros::{btf_map, classifier},
    programs::TcContext,
};

#[btf_map]
static jn_floor_fwd: HashMap<u32, u32, 65536> = HashMap::new();

#[classifier]
pub fn floor_redirect(ctx: TcContext) -> i32 {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    match jn_floor_fwd.get_ptr(ifindex) {
        // SAFETY: plain helper call; the value is copied at once.
        Some(out) => unsafe { bpf_redirect(*out, 0) as i32 },
        None => TC_ACT_SHOT,
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
