//! Handing a frame to one local port: shared by every hook that delivers.
use aya_ebpf::helpers::{bpf_redirect, bpf_redirect_peer};
use juneau_common::l2::PORT_PEER;

/// Straight into the peer's namespace when the port is a Pod veth (its ingress is
/// entered directly, no veth transmit or backlog hop), else to the port's egress.
#[inline(always)]
pub fn deliver(ifindex: u32, flags: u32) -> i32 {
    // SAFETY: plain helper calls.
    unsafe {
        if flags & PORT_PEER != 0 {
            bpf_redirect_peer(ifindex, 0) as i32
        } else {
            bpf_redirect(ifindex, 0) as i32
        }
    }
}
