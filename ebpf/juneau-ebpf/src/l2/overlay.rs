//! The VXLAN overlay in external (collect_md) mode: the tunnel key carries the VNI and
//! the remote VTEP, so one device serves every segment and every Node.
use core::mem::size_of;

use aya_ebpf::{
    bindings::bpf_tunnel_key,
    helpers::{bpf_clone_redirect, bpf_redirect, bpf_skb_get_tunnel_key, bpf_skb_set_tunnel_key},
    programs::TcContext,
};
use juneau_common::DropReason;

use crate::maps;

const TUNNEL_TTL: u8 = 64;

/// VNI and remote VTEP of a frame received by the VXLAN device.
#[inline(always)]
pub fn tunnel_source(ctx: &TcContext) -> Result<(u32, u32), DropReason> {
    // SAFETY: zeroed plain-data struct filled by the helper.
    let mut key: bpf_tunnel_key = unsafe { core::mem::zeroed() };
    let rc = unsafe {
        bpf_skb_get_tunnel_key(ctx.skb.skb, &mut key, size_of::<bpf_tunnel_key>() as u32, 0)
    };
    if rc != 0 {
        return Err(DropReason::NoTunnelKey);
    }
    // SAFETY: IPv4 tunnel (no BPF_F_TUNINFO_IPV6 flag asked).
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

/// Set the tunnel key for (`vni`, `vtep`) on `skb`.
#[inline(always)]
pub fn set_key(
    skb: *mut aya_ebpf::bindings::__sk_buff,
    vni: u32,
    vtep: u32,
) -> Result<(), DropReason> {
    // SAFETY: zeroed plain-data struct read by the helper.
    let mut key: bpf_tunnel_key = unsafe { core::mem::zeroed() };
    key.tunnel_id = vni;
    key.__bindgen_anon_1.remote_ipv4 = vtep;
    key.tunnel_ttl = TUNNEL_TTL;
    let rc =
        unsafe { bpf_skb_set_tunnel_key(skb, &mut key, size_of::<bpf_tunnel_key>() as u32, 0) };
    if rc != 0 {
        return Err(DropReason::NoOverlay);
    }
    Ok(())
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
