//! The VXLAN overlay in external (collect_md) mode: the tunnel key carries the VNI and
//! the remote VTEP, so one device serves every segment and every Node. The datapath's
//! own encapsulation (`encap`) and decapsulation (`decap`) bypass the device for known
//! unicast IPv4.
pub mod decap;
mod encap;

use core::mem::{MaybeUninit, size_of};

use aya_ebpf::{
    bindings::{BPF_F_ZERO_CSUM_TX, bpf_tunnel_key},
    helpers::{bpf_clone_redirect, bpf_redirect, bpf_skb_get_tunnel_key, bpf_skb_set_tunnel_key},
    programs::TcContext,
};
use juneau_common::DropReason;

use crate::maps;

const TUNNEL_TTL: u8 = 64;

/// VNI and remote VTEP of a frame received by the VXLAN device.
#[inline(always)]
pub fn tunnel_source(ctx: &TcContext) -> Result<(u32, u32), DropReason> {
    // The helper fills the whole key (uninitialized memory is its documented input), so
    // no zeroing on every received frame.
    let mut key = MaybeUninit::<bpf_tunnel_key>::uninit();
    // SAFETY: the helper writes `size` bytes into the key.
    let rc = unsafe {
        bpf_skb_get_tunnel_key(
            ctx.skb.skb,
            key.as_mut_ptr(),
            size_of::<bpf_tunnel_key>() as u32,
            0,
        )
    };
    if rc != 0 {
        return Err(DropReason::NoTunnelKey);
    }
    // SAFETY: filled by the helper (rc == 0); IPv4 tunnel (no BPF_F_TUNINFO_IPV6 asked).
    let key = unsafe { key.assume_init() };
    Ok((key.tunnel_id, unsafe { key.__bindgen_anon_1.remote_ipv4 }))
}

/// The Node's VXLAN device, if the overlay is attached.
#[inline(always)]
pub fn vxlan_ifindex() -> Result<u32, DropReason> {
    match maps::jn_node.get(0) {
        Some(node) if node.vxlan_ifindex != 0 => Ok(node.vxlan_ifindex),
        _ => Err(DropReason::NoOverlay),
    }
}

/// This Node's VTEP (host order), 0 without an overlay.
#[inline(always)]
pub fn local_vtep() -> u32 {
    maps::jn_node.get(0).map(|n| n.local_vtep).unwrap_or(0)
}

/// Set the tunnel key for (`vni`, `vtep`) on `skb`, with a zero outer UDP checksum
/// (RFC 7348 allows it over IPv4; the Ethernet FCS and the inner checksums protect the
/// frame). The helper asks for a checksum unless told not to, and then every frame sent
/// pays for one, on a 64 KB GSO packet too: the kernel VXLAN device defaults to none.
#[inline(always)]
pub fn set_key(
    skb: *mut aya_ebpf::bindings::__sk_buff,
    vni: u32,
    vtep: u32,
) -> Result<(), DropReason> {
    let mut key = MaybeUninit::<bpf_tunnel_key>::uninit();
    crate::zero::in_place(&mut key);
    let k = key.as_mut_ptr();
    // SAFETY: the key is zeroed (a valid value) and written in place, never moved, so
    // no copy of it is made for LLVM to turn into a memset.
    let rc = unsafe {
        (*k).tunnel_id = vni;
        (*k).__bindgen_anon_1.remote_ipv4 = vtep;
        (*k).tunnel_ttl = TUNNEL_TTL;
        bpf_skb_set_tunnel_key(
            skb,
            k,
            size_of::<bpf_tunnel_key>() as u32,
            BPF_F_ZERO_CSUM_TX as u64,
        )
    };
    if rc != 0 {
        return Err(DropReason::NoOverlay);
    }
    Ok(())
}

/// Known unicast to another Node: encapsulated by the datapath when the frame allows
/// it (`encap`), else by the VXLAN device.
#[inline(always)]
pub fn unicast(
    ctx: &TcContext,
    vni: u32,
    vtep: u32,
    addrs: &crate::eth::Addrs,
) -> Result<i32, DropReason> {
    if let Some(node) = maps::jn_node.get(0)
        && let Some(verdict) = encap::send(ctx, node, vni, vtep, &addrs.dst, &addrs.src)?
    {
        return Ok(verdict);
    }
    send(ctx, vni, vtep, false)
}

/// Send the frame (or, with `clone`, a copy of it) to another Node.
#[inline(always)]
pub fn send(ctx: &TcContext, vni: u32, vtep: u32, clone: bool) -> Result<i32, DropReason> {
    send_skb(ctx.skb.skb, vni, vtep, clone)
}

#[inline(always)]
pub fn send_skb(
    skb: *mut aya_ebpf::bindings::__sk_buff,
    vni: u32,
    vtep: u32,
    clone: bool,
) -> Result<i32, DropReason> {
    let vx = vxlan_ifindex()?;
    set_key(skb, vni, vtep)?;
    // SAFETY: plain helper calls on the program's context.
    unsafe {
        if clone {
            if bpf_clone_redirect(skb, vx, 0) != 0 {
                return Err(DropReason::CloneFailed);
            }
            Ok(0)
        } else {
            Ok(bpf_redirect(vx, 0) as i32)
        }
    }
}
