//! L2Network switching: learn the source, forward by destination MAC only (L2-01,
//! L2-28). Nothing above the Ethernet header is read, so every EtherType passes.
mod flood;
mod learn;

use aya_ebpf::{
    helpers::{bpf_redirect, bpf_redirect_peer},
    programs::TcContext,
};
use juneau_common::{
    DropReason, FdbEntry,
    l2::{PORT_ACTIVE, PORT_PEER},
};

use crate::{eth, maps};

/// Frames sent by a workload into its port.
#[inline(always)]
pub fn port_ingress(ctx: &TcContext) -> Result<i32, DropReason> {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    let port = maps::jn_l2_port
        .get_ptr_mut(ifindex)
        .ok_or(DropReason::NotAPort)?;
    // SAFETY: array values live as long as the map; concurrent writers only touch the
    // learning cache, where a torn read costs one extra table lookup.
    let port = unsafe { &mut *port };
    if port.flags & PORT_ACTIVE == 0 {
        return Err(DropReason::NotAPort);
    }
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    let segment = port.segment;
    let fdb = maps::jn_l2_fdb.get(segment).ok_or(DropReason::NoSegment)?;

    learn::learn(port, ifindex, fdb, &addrs.src)?;

    if !eth::is_group(&addrs.dst) {
        if let Some(entry) = fdb.get_ptr(addrs.dst) {
            // SAFETY: copied out at once; an LRU entry may be reused after this point.
            let entry: FdbEntry = unsafe { *entry };
            if entry.ifindex == ifindex {
                return Err(DropReason::Hairpin);
            }
            if entry.ifindex != 0 {
                return Ok(deliver(entry.ifindex, entry.flags));
            }
        }
    }
    flood::flood(ctx, segment, ifindex)
}

/// Hand the frame to one local port: straight into the peer's namespace when the port
/// is a Pod veth, else to the port's egress.
#[inline(always)]
fn deliver(ifindex: u32, flags: u32) -> i32 {
    // SAFETY: plain helper calls.
    unsafe {
        if flags & PORT_PEER != 0 {
            bpf_redirect_peer(ifindex, 0) as i32
        } else {
            bpf_redirect(ifindex, 0) as i32
        }
    }
}
