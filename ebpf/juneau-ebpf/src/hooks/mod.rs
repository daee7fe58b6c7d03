//! One pipeline per attach point (Cilium's `bpf_lxc.c` / `bpf_overlay.c` /
//! `bpf_host.c` are the model): each file composes the feature stages its hook runs,
//! in order, and the programs that hook enters by tail call. Features never call a
//! hook, and a feature calls only features below it:
//!
//! ```text
//! hooks (port, overlay, underlay)
//!   -> gw (the router), eip (ElasticIPs)         entered by tail call, or inline
//!   -> l2 (learn, forward, flood), overlay (encap, decap, tunnel keys)
//!   -> deliver (to_port: the delivery stage), tail, stats
//!   -> wire formats (eth, arp, ipv4), maps
//! ```
pub mod deliver;
pub mod eip_port;
pub mod forward;
pub mod nat_out;
pub mod overlay;
pub mod port;
pub mod router;
pub mod svc_host;
pub mod underlay;
pub mod uplink;

use aya_ebpf::bindings::TC_ACT_SHOT;
use juneau_common::DropReason;

use crate::stats;

/// A pipeline's result as the kernel takes it: a drop is counted under its reason.
#[inline(always)]
pub fn verdict(result: Result<i32, DropReason>) -> i32 {
    match result {
        Ok(verdict) => verdict,
        Err(reason) => {
            stats::drop(reason);
            TC_ACT_SHOT
        }
    }
}
