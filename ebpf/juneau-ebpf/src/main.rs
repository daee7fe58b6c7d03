//! Juneau's eBPF datapath. The entry points are here and nothing else: one program
//! per hook, named by the hook, and the programs hooks enter by tail call. Each runs
//! its hook's pipeline (`hooks/`), which composes the feature stages (`l2`, `overlay`,
//! `gw`, `eip`, `svc` on `conntrack`) over the delivery stage (`deliver`), the wire formats and the maps
//! (`maps`; their types in `juneau-common`).
#![no_std]
#![no_main]

mod arp;
mod cb;
mod conntrack;
mod deliver;
mod eip;
mod eth;
mod fib;
mod frag;
mod gw;
mod hooks;
mod icmp;
mod ipv4;
mod l2;
mod l4;
mod maps;
mod nat;
mod neighbour;
mod overlay;
mod policy;
mod quoted;
mod stats;
mod svc;
mod tail;
mod xlate;
mod zero;

use aya_ebpf::{macros::classifier, programs::TcContext};
use hooks::verdict;

// `#[inline(always)]` on an entry point: the macro wraps it in the section's function,
// and LLVM left the two biggest bodies (`gw_route`, `gw_forward`) behind a BPF-to-BPF
// call, paid by every packet.

/// Ingress of a Pod NIC's host-side veth (a tc filter, or a TCX link with
/// `--port-attach tcx`): every frame a workload sends.
#[classifier]
pub fn port_ingress(ctx: TcContext) -> i32 {
    verdict(hooks::port::ingress(&ctx))
}

/// TCX ingress of the Node's VXLAN device (external mode): frames of L2Network
/// segments arriving from other Nodes.
#[classifier]
pub fn overlay_ingress(ctx: TcContext) -> i32 {
    verdict(hooks::overlay::ingress(&ctx))
}

/// TCX ingress of the Node's underlay NIC: VXLAN frames for local Pods, decapsulated
/// by the datapath; everything else passes to the stack untouched.
#[classifier]
pub fn underlay_ingress(ctx: TcContext) -> i32 {
    verdict(hooks::underlay::ingress(&ctx))
}

/// The Vpc router: the ingress program of a Subnet NIC's veth, and entered from
/// `port_ingress` by a tail call (`jn_progs`) on a gateway L2Network's port.
#[classifier]
#[inline(always)]
pub fn gw_route(ctx: TcContext) -> i32 {
    verdict(hooks::router::run(&ctx))
}

/// The router's second half (policy, the route, the hop), entered from `gw_route` by a
/// tail call.
#[classifier]
#[inline(always)]
pub fn gw_forward(ctx: TcContext) -> i32 {
    verdict(hooks::forward::run(&ctx))
}

/// A direct ElasticIP NIC's port: the ingress program of its veth (and entered from
/// `port_ingress` by a tail call in test runs).
#[classifier]
pub fn eip_port(ctx: TcContext) -> i32 {
    verdict(hooks::eip_port::run(&ctx))
}

/// Delivery into a Service-consuming port, entered by a tail call from the delivery
/// stage of every hook.
#[classifier]
pub fn deliver_svc(ctx: TcContext) -> i32 {
    verdict(hooks::deliver::run(&ctx))
}

/// Ingress of the peer of the Node's Service device (a tc filter): replies to this
/// Node's Service source address, given back to their clients (SVC-02).
#[classifier]
pub fn svc_host(ctx: TcContext) -> i32 {
    verdict(hooks::svc_host::run(&ctx))
}

/// A NATGateway's way out (NAT-01), entered from `gw_forward` by a tail call.
#[classifier]
pub fn nat_out(ctx: TcContext) -> i32 {
    verdict(hooks::nat_out::run(&ctx))
}

/// ElasticIPs on the uplink, entered from `underlay_ingress` by a tail call.
#[classifier]
pub fn eip_uplink(ctx: TcContext) -> i32 {
    verdict(hooks::uplink::run(&ctx))
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
