//! Out of the Node by its own routing table, without its stack: `bpf_fib_lookup` from
//! the port the packet came in by gives the next hop's MAC and the device. Two features
//! leave this way and differ only in what they do with a lookup that cannot forward at
//! once: a direct ElasticIP's packet falls to the stack (`eip::fib`), a translated one
//! must not (its source is no address of the veth it came from) and is resolved by
//! `bpf_redirect_neigh` or dropped (`nat::out`).
use core::{ffi::c_void, mem::MaybeUninit};

use aya_ebpf::{
    bindings::bpf_fib_lookup as FibLookup,
    helpers::{bpf_fib_lookup, bpf_redirect_neigh},
    programs::TcContext,
};
use juneau_common::DropReason;

use crate::{
    eth::{ETH_HLEN, store},
    ipv4,
};

const AF_INET: u8 = 2;

/// A lookup's result: the kernel's return code and the request it filled in (MACs and
/// the device on success, the device on `NO_NEIGH`).
pub struct Found {
    pub rc: i64,
    pub req: FibLookup,
}

/// Looks up `saddr -> daddr` as if routed in from `ingress`. `tot_len` 0 lets the
/// kernel check the packet itself against the device's MTU (a GSO packet by its
/// segments), as forwarding would.
#[inline(always)]
pub fn lookup(
    ctx: &TcContext,
    ingress: u32,
    saddr: u32,
    daddr: u32,
    proto: u8,
    tot_len: u16,
) -> Found {
    let mut req = MaybeUninit::<FibLookup>::uninit();
    crate::zero::in_place(&mut req);
    // Filled where it lies: a by-value copy of the zeroed request (`assume_init`
    // first) is a second request, which LLVM zeroes again by a `memset` call.
    // SAFETY: an all-zero lookup request is valid; the fields it needs are set below.
    let p = unsafe { &mut *req.as_mut_ptr() };
    p.family = AF_INET;
    p.l4_protocol = proto;
    p.__bindgen_anon_1.tot_len = tot_len;
    p.ifindex = ingress;
    p.__bindgen_anon_3.ipv4_src = saddr;
    p.__bindgen_anon_4.ipv4_dst = daddr;
    // SAFETY: the context and the request are valid for the call; sizes are theirs.
    let rc = unsafe {
        bpf_fib_lookup(
            ctx.skb.skb as *mut c_void,
            p,
            core::mem::size_of::<FibLookup>() as i32,
            0,
        )
    };
    // SAFETY: zeroed, then written by us and the kernel.
    Found {
        rc,
        req: unsafe { req.assume_init() },
    }
}

/// One hop on a successful lookup: TTL - 1 and the MACs it gave (each MAC stored as a
/// 16-bit and a 32-bit word, bytes 0-1 and 2-5, not byte by byte). The caller checked
/// the TTL.
#[inline(always)]
pub fn hop(ctx: &TcContext, p: &FibLookup) -> Result<(), DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + 20 > end {
        return Err(DropReason::BadIpHeader);
    }
    let (d, s) = macs(p);
    // SAFETY: inside [start, start + ETH_HLEN + 20), checked above.
    unsafe { rewrite(start, d, s) };
    Ok(())
}

/// A successful lookup's MACs as the frame's words (bytes 0-1, 2-5): destination,
/// source.
#[inline(always)]
pub fn macs(p: &FibLookup) -> ((u16, u32), (u16, u32)) {
    let (d, s) = (&p.dmac, &p.smac);
    (
        (
            u16::from_ne_bytes([d[0], d[1]]),
            u32::from_ne_bytes([d[2], d[3], d[4], d[5]]),
        ),
        (
            u16::from_ne_bytes([s[0], s[1]]),
            u32::from_ne_bytes([s[2], s[3], s[4], s[5]]),
        ),
    )
}

/// One hop by MACs already known (`ct::NatHop`): TTL - 1 and the MACs. The caller
/// checked the TTL.
#[inline(always)]
pub fn hop_by(ctx: &TcContext, dmac: (u16, u32), smac: (u16, u32)) -> Result<(), DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + 20 > end {
        return Err(DropReason::BadIpHeader);
    }
    // SAFETY: inside [start, start + ETH_HLEN + 20), checked above.
    unsafe { rewrite(start, dmac, smac) };
    Ok(())
}

/// TTL - 1 and the two MACs written as words.
///
/// # Safety
/// `[start, start + ETH_HLEN + 20)` is inside the packet.
#[inline(always)]
unsafe fn rewrite(start: usize, d: (u16, u32), s: (u16, u32)) {
    // SAFETY: the caller's bounds.
    unsafe {
        ipv4::decrement_ttl(start);
        store::<u16>(start, d.0);
        store::<u32>(start + 2, d.1);
        store::<u16>(start + 6, s.0);
        store::<u32>(start + 8, s.1);
    }
}

/// Out of `ifindex` when the lookup found the route but not the next hop's MAC
/// (`NO_NEIGH`): TTL - 1, then `bpf_redirect_neigh`, which looks the route up again and
/// resolves the neighbour as the stack would (the packet queued meanwhile, not lost).
#[inline(always)]
pub fn via_neighbour(ctx: &TcContext, ifindex: u32) -> Result<i32, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + 20 > end {
        return Err(DropReason::BadIpHeader);
    }
    // SAFETY: inside [start, start + ETH_HLEN + 20), checked above.
    unsafe { ipv4::decrement_ttl(start) };
    // SAFETY: plain helper call; a null params pointer asks for the FIB lookup.
    Ok(unsafe { bpf_redirect_neigh(ifindex, core::ptr::null_mut(), 0, 0) } as i32)
}
