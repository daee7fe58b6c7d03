//! Out of the Node by its routing table without its stack (EIP-09, EIP-13): the FIB
//! gives the next hop's MAC and the device; the frame leaves with one hop taken and
//! the ElasticIP kept as source. Ingress from outside skips the stack too
//! (`eip_uplink`), so the Node's connection tracking sees neither direction rather
//! than one (a half-seen flow is INVALID to kube-proxy's rules), and no PREROUTING
//! DNAT of ClusterIPs applies (EIP-15). Whatever the FIB cannot forward at once (the
//! Node's own addresses, an unresolved neighbour, a packet too big for the device,
//! TTL 1) is left to the stack, which answers or resolves as a router does.
use core::{ffi::c_void, mem::MaybeUninit};

use aya_ebpf::{
    bindings::{BPF_FIB_LKUP_RET_SUCCESS, TC_ACT_OK, bpf_fib_lookup as FibLookup},
    helpers::{bpf_fib_lookup, bpf_redirect},
    programs::TcContext,
};
use juneau_common::DropReason;

use crate::{
    eth::{ETH_HLEN, store},
    ipv4::{self, Ipv4},
};

const AF_INET: u8 = 2;

#[inline(always)]
pub fn to_outside(ctx: &TcContext, ingress: u32, ip: &Ipv4) -> Result<i32, DropReason> {
    if ip.ttl <= 1 {
        return Ok(TC_ACT_OK);
    }
    let mut req = MaybeUninit::<FibLookup>::uninit();
    crate::zero::in_place(&mut req);
    // SAFETY: an all-zero lookup request is valid; the fields it needs are set below.
    let p = unsafe { req.assume_init_mut() };
    p.family = AF_INET;
    p.l4_protocol = ip.proto;
    p.__bindgen_anon_1.tot_len = ip.tot_len as u16;
    p.ifindex = ingress;
    p.__bindgen_anon_3.ipv4_src = ip.saddr;
    p.__bindgen_anon_4.ipv4_dst = ip.daddr;
    // SAFETY: the context and the request are valid for the call; sizes are theirs.
    let rc = unsafe {
        bpf_fib_lookup(
            ctx.skb.skb as *mut c_void,
            p,
            core::mem::size_of::<FibLookup>() as i32,
            0,
        )
    };
    if rc != BPF_FIB_LKUP_RET_SUCCESS as i64 {
        return Ok(TC_ACT_OK);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + 20 > end {
        return Err(DropReason::BadIpHeader);
    }
    // SAFETY: inside [start, start + ETH_HLEN + 20), checked above; TTL above 1.
    unsafe {
        ipv4::decrement_ttl(start);
        // Each MAC is stored as a 16-bit and a 32-bit word (bytes 0-1, 2-5), not byte
        // by byte.
        let (d, s) = (&p.dmac, &p.smac);
        store::<u16>(start, u16::from_ne_bytes([d[0], d[1]]));
        store::<u32>(start + 2, u32::from_ne_bytes([d[2], d[3], d[4], d[5]]));
        store::<u16>(start + 6, u16::from_ne_bytes([s[0], s[1]]));
        store::<u32>(start + 8, u32::from_ne_bytes([s[2], s[3], s[4], s[5]]));
    }
    // SAFETY: plain helper call.
    Ok(unsafe { bpf_redirect(p.ifindex, 0) } as i32)
}
