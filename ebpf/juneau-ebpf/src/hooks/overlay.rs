//! TCX ingress of the Node's VXLAN device (`overlay_ingress`, external mode): frames of
//! L2Network segments arriving from other Nodes. Split horizon: they go to local ports
//! only, never back into the overlay.
//!
//! ```text
//! tunnel key -> VNI, remote VTEP        NO_TUNNEL_KEY
//! to this Node's Service source address -> tail: svc_host (SVC-02)
//! no segment here: ARP -> router's listen copy, else UNKNOWN_VNI
//! learn the source behind the VTEP (l2::learn); ARP -> router's snoop
//! switch to local ports (l2::forward)
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{DropReason, FdbKey, svc::SVC_SOURCE_MAC, tail::TAIL_SVC_HOST};

use crate::{
    arp::ETH_P_ARP,
    eth, gw,
    l2::{forward, learn},
    maps, overlay, tail,
};

#[inline(always)]
pub fn ingress(ctx: &TcContext) -> Result<i32, DropReason> {
    let (vni, vtep) = overlay::tunnel_source(ctx)?;
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    // To this Node's Service source address (SVC-02): a provider Pod's reply, routed
    // here by its Node (whether or not a port of the segment is here), for `svc_host`
    // to give its client back. Only on the provider's segment, whose Subnet ports
    // are source-guarded: a frame to that MAC on any other segment is nobody's.
    if eth::bits(&addrs.dst) == eth::bits(&FdbKey::new(SVC_SOURCE_MAC)) {
        if !crate::svc::is_provider_segment(vni) {
            return Err(DropReason::NotAReply);
        }
        tail::call(ctx, TAIL_SVC_HOST);
        return Err(DropReason::NoDeliveryProgram);
    }
    let arp = eth::ethertype(ctx) == Some(ETH_P_ARP);
    // SAFETY: the value is copied at once.
    let Some(segment) = unsafe { maps::jn_l2_vni.get(vni) }.copied() else {
        // No port here: only the router may want it (an ARP copy of `gw::listen`).
        return Err(if arp {
            gw::listen::heard(ctx, vni, vtep)
        } else {
            DropReason::UnknownVni
        });
    };
    let fdb = maps::jn_l2_fdb.get(segment).ok_or(DropReason::NoSegment)?;
    learn::learn_remote(fdb, &addrs.src, vtep);
    if arp {
        gw::snoop::from_overlay(ctx, vni, vtep);
    }
    forward::forward(ctx, fdb, segment, vni, 0, &addrs, true)
}
