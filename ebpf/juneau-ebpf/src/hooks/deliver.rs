//! `deliver_svc`, entered by a tail call from the delivery stage (`deliver::to_port`)
//! for IPv4 into a port that consumes Services (routed and gateway ports): the
//! receiver's side of policy, then a Service reply's ClusterIP given back, then the
//! redirect.
//!
//! ```text
//! cb::ToDeliver (port, flags) -> jn_l2_port
//!   -> crossed the gateway? its segment's ACL, then the NIC's groups (policy::ingress)
//!   -> maybe a reply: svc::reverse in the port's zone
//!   -> deliver::straight (redirect_peer or redirect)
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, PortConfig, port::PORT_ROUTED};

use crate::{cb, deliver, eth, maps, policy, svc};

/// `deliver_svc`: the port handed over in the control block, the receiver's side of
/// policy (`policy::ingress`), the reply's translation back (`svc::reverse`, in the
/// port's zone), then the redirect.
#[inline(always)]
pub fn run(ctx: &TcContext) -> Result<i32, DropReason> {
    let cb::ToDeliver { ifindex, flags } = cb::ToDeliver::take(ctx);
    // SAFETY: copied at once.
    let port: PortConfig = maps::jn_l2_port
        .get(ifindex)
        .copied()
        .ok_or(DropReason::NotAPort)?;
    // Whether the connection's entry in this zone may be a Service's reply: policy,
    // where it looks the entry up, says (one lookup for both stages).
    let maybe_reply = match crossed(ctx, &port)? {
        Some(acl) => policy::ingress(ctx, &port, acl)?,
        // Within a Subnet: its NIC's SecurityGroups, never its segment's ACL.
        None if port.flags & PORT_ROUTED != 0 => policy::ingress(ctx, &port, 0)?,
        // Switched inside an L2Network: neither (L2-19, L2-31).
        None => true,
    };
    if maybe_reply {
        svc::reverse(ctx, port.vni)?;
    }
    Ok(deliver::straight(ifindex, flags))
}

/// Whether the packet came across the gateway, and then its segment's NetworkACL (0 for
/// none): the router gave it the segment's gateway MAC as source (a frame switched
/// inside the segment, or delivered within a Subnet, keeps its sender's). `None`: it
/// did not cross.
#[inline(always)]
fn crossed(ctx: &TcContext, port: &PortConfig) -> Result<Option<u32>, DropReason> {
    let src = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?.src;
    if src != port.gw_mac {
        return Ok(None);
    }
    // SAFETY: copied at once.
    Ok(Some(
        unsafe { maps::jn_gw_seg.get(port.vni) }
            .map(|s| s.acl)
            .unwrap_or(0),
    ))
}
