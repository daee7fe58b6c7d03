//! Measurement baselines, loaded by benchmarks beside the real datapath so every path
//! is reported as a ratio taken in the same run:
//! - `floor_redirect`: the least a TC forwarding program can do (one hash lookup by
//!   ingress ifindex, one `bpf_redirect`);
//! - `floor_redirect_peer`: the same with `bpf_redirect_peer`, the physical limit of
//!   delivering into a Pod from its sender's veth;
//! - `floor_to_ingress`: the same into another device's ingress, with that device's MAC;
//! - `floor_learn`: a learning switch reduced to the kernel's hash table (source
//!   looked up and inserted, destination looked up, `bpf_redirect`);
//! - `xdp_tx`: the traffic generator (XDP live-frames test runs transmit every frame it
//!   returns `XDP_TX` for); the benchmarked paths never rewrite frames, so it need not
//!   rewrite headers on the recycled pages;
//! - `xdp_tx_new_source`: the MAC-flood generator, every frame with a source MAC never
//!   sent before;
//! - `xdp_tx_template`: the generator for paths that rewrite frames (a router: MACs,
//!   TTL, checksum), which would otherwise come back on a recycled page rewritten: each
//!   frame's first 64 bytes are written from `jn_floor_template` before it is sent.
#![no_std]
#![no_main]
#![allow(non_upper_case_globals)]

use aya_ebpf::{
    bindings::{BPF_F_INGRESS, TC_ACT_SHOT, xdp_action},
    btf_maps::{Array, HashMap, PerCpuArray},
    helpers::{bpf_redirect, bpf_redirect_peer},
    macros::{btf_map, classifier, xdp},
    programs::{TcContext, XdpContext},
};
use juneau_common::{FdbEntry, FdbKey, l2::FDB_ENTRIES};

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

#[classifier]
pub fn floor_redirect_peer(ctx: TcContext) -> i32 {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    match jn_floor_fwd.get_ptr(ifindex) {
        // SAFETY: plain helper call; the value is copied at once.
        Some(out) => unsafe { bpf_redirect_peer(*out, 0) as i32 },
        None => TC_ACT_SHOT,
    }
}

/// Where `floor_to_ingress` hands a frame: the device whose ingress takes it and the
/// destination MAC that device answers to, by the sender's ingress ifindex.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ToIngress {
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub pad: [u8; 2],
}

#[btf_map]
static jn_floor_ingress: HashMap<u32, ToIngress, 1024> = HashMap::new();

/// The least a Pod-side program can do to turn a frame around through another device's
/// ingress (the reference's way between two ElasticIPs of one Node): one lookup, the
/// destination MAC, `bpf_redirect(.., BPF_F_INGRESS)`.
#[classifier]
pub fn floor_to_ingress(ctx: TcContext) -> i32 {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    let Some(to) = jn_floor_ingress.get_ptr(ifindex) else {
        return TC_ACT_SHOT;
    };
    // SAFETY: the value is copied at once.
    let to = unsafe { *to };
    let (data, end) = (ctx.data(), ctx.data_end());
    if data + 14 > end {
        return TC_ACT_SHOT;
    }
    // SAFETY: bytes 0..6 are inside the frame (checked above).
    unsafe { core::ptr::write_unaligned(data as *mut [u8; 6], to.mac) };
    // SAFETY: plain helper call.
    unsafe { bpf_redirect(to.ifindex, BPF_F_INGRESS as u64) as i32 }
}

/// `floor_learn`'s table: the shape of one segment's learning table (`jn_l2_fdb`'s
/// inner maps), preallocated like them.
#[btf_map]
static jn_floor_fdb: HashMap<FdbKey, FdbEntry, { FDB_ENTRIES as usize }> = HashMap::new();

/// The least a learning switch can do with the kernel's hash table, the ceiling of
/// `l2_learn_new_mac_vs_floor`: look the source up, insert it when missing (no clock,
/// no move or refresh rules, no learning cache), look the destination up, redirect to
/// its port. Unknown destinations are dropped.
#[classifier]
pub fn floor_learn(ctx: TcContext) -> i32 {
    let (data, end) = (ctx.data(), ctx.data_end());
    if data + 14 > end {
        return TC_ACT_SHOT;
    }
    let (mut dst, mut src) = (FdbKey::default(), FdbKey::default());
    // SAFETY: bytes 0..12 are inside the frame (checked above).
    unsafe {
        dst.mac = core::ptr::read_unaligned(data as *const [u8; 6]);
        src.mac = core::ptr::read_unaligned((data + 6) as *const [u8; 6]);
    }
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    if jn_floor_fdb.get_ptr(src).is_none() {
        let entry = FdbEntry {
            ifindex,
            ..FdbEntry::default()
        };
        if jn_floor_fdb.insert(src, entry, 0).is_err() {
            return TC_ACT_SHOT;
        }
    }
    match jn_floor_fdb.get_ptr(dst) {
        // SAFETY: plain helper call; the value is copied at once.
        Some(out) => unsafe { bpf_redirect((*out).ifindex, 0) as i32 },
        None => TC_ACT_SHOT,
    }
}

/// Drops everything: a receiver that takes frames off the wire and does nothing else,
/// so a packet-rate run measures the path, not the receiver's IP stack.
#[classifier]
pub fn floor_drop(_ctx: TcContext) -> i32 {
    TC_ACT_SHOT
}

#[xdp]
pub fn xdp_tx(_ctx: XdpContext) -> u32 {
    xdp_action::XDP_TX
}

/// The flood generator's sequence number, per CPU (it runs on one).
#[btf_map]
static jn_floor_seq: PerCpuArray<u32, 1> = PerCpuArray::new();

/// A tenant trying to overflow the learning tables: source MAC `02:f1:<seq>`, a new
/// one on every frame (written on each run, so page recycling cannot repeat one).
#[xdp]
pub fn xdp_tx_new_source(ctx: XdpContext) -> u32 {
    let (data, end) = (ctx.data(), ctx.data_end());
    if data + 12 > end {
        return xdp_action::XDP_ABORTED;
    }
    let Some(seq) = jn_floor_seq.get_ptr_mut(0) else {
        return xdp_action::XDP_ABORTED;
    };
    // SAFETY: the per-CPU value is ours for this run; bytes 6..12 are inside the frame
    // (checked above).
    unsafe {
        *seq = (*seq).wrapping_add(1);
        let src = (data + 6) as *mut u8;
        *src = 0x02;
        *src.add(1) = 0xf1;
        for (i, b) in (*seq).to_be_bytes().into_iter().enumerate() {
            *src.add(2 + i) = b;
        }
    }
    xdp_action::XDP_TX
}

/// The frame `xdp_tx_template` sends (its first 64 bytes).
#[btf_map]
static jn_floor_template: Array<[u64; 8], 1> = Array::new();

#[xdp]
pub fn xdp_tx_template(ctx: XdpContext) -> u32 {
    let (data, end) = (ctx.data(), ctx.data_end());
    if data + 64 > end {
        return xdp_action::XDP_ABORTED;
    }
    let Some(t) = jn_floor_template.get(0) else {
        return xdp_action::XDP_ABORTED;
    };
    for (i, w) in t.iter().enumerate() {
        // SAFETY: eight words inside the first 64 bytes of the frame (checked above).
        unsafe { core::ptr::write_unaligned((data + 8 * i) as *mut u64, *w) };
    }
    xdp_action::XDP_TX
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
