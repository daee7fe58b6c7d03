//! Juneau's eBPF datapath. One entry program per hook, named by the hook; the features
//! live in library modules (`l2` switching, `overlay` with its encapsulation and
//! decapsulation, `deliver`), the map definitions in `maps`, the map types in
//! `juneau-common`.
#![no_std]
#![no_main]

mod arp;
mod deliver;
mod drop;
mod eip;
mod eth;
mod gw;
mod ipv4;
mod l2;
mod maps;
mod overlay;
mod zero;

use aya_ebpf::{bindings::TC_ACT_SHOT, macros::classifier, programs::TcContext};
use juneau_common::DropReason;

#[inline(always)]
fn verdict(result: Result<i32, DropReason>) -> i32 {
    match result {
        Ok(verdict) => verdict,
        Err(reason) => {
            drop::count(reason);
            TC_ACT_SHOT
        }
    }
}

/// TCX ingress of a Pod NIC's host-side veth: every frame the workload sends on an
/// L2Network enters the segment here.
#[classifier]
pub fn port_ingress(ctx: TcContext) -> i32 {
    verdict(l2::from_port(&ctx))
}

/// TCX ingress of the Node's VXLAN device (external mode): frames of L2Network
/// segments arriving from other Nodes.
#[classifier]
pub fn overlay_ingress(ctx: TcContext) -> i32 {
    verdict(l2::from_overlay(&ctx))
}

/// TCX ingress of the Node's underlay NIC: VXLAN frames for local Pods, decapsulated
/// by the datapath; everything else passes to the stack untouched.
#[classifier]
pub fn underlay_ingress(ctx: TcContext) -> i32 {
    verdict(overlay::decap::from_underlay(&ctx))
}

/// The Vpc router, entered from `port_ingress` by a tail call (`jn_gw_progs`): ARP
/// for the gateway, pings to it, IPv4 between the segments of a Vpc.
#[classifier]
pub fn gw_route(ctx: TcContext) -> i32 {
    verdict(gw::try_route(&ctx))
}

/// A direct ElasticIP NIC's port, entered from `port_ingress` by a tail call
/// (`jn_gw_progs`): ARP for 169.254.0.1, the source guard, ElasticIP to ElasticIP.
#[classifier]
pub fn eip_port(ctx: TcContext) -> i32 {
    verdict(eip::port::try_port(&ctx))
}

/// ElasticIPs on the uplink, entered from `underlay_ingress` by a tail call: ARP for
/// the advertised ones, IPv4 to any of them.
#[classifier]
pub fn eip_uplink(ctx: TcContext) -> i32 {
    verdict(eip::uplink::try_uplink(&ctx))
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
