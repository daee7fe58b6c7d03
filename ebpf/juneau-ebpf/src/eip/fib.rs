//! Out of the Node by its routing table without its stack (EIP-09, EIP-13): the FIB
//! gives the next hop's MAC and the device; the frame leaves with one hop taken and
//! the ElasticIP kept as source. Ingress from outside skips the stack too
//! (`eip_uplink`), so the Node's connection tracking sees neither direction rather
//! than one (a half-seen flow is INVALID to kube-proxy's rules), and no PREROUTING
//! DNAT of ClusterIPs applies (EIP-15). Whatever the FIB cannot forward at once (the
//! Node's own addresses, an unresolved neighbour, a packet too big for the device,
//! TTL 1) is left to the stack, which answers or resolves as a router does.
use aya_ebpf::{
    bindings::{BPF_FIB_LKUP_RET_SUCCESS, TC_ACT_OK},
    helpers::bpf_redirect,
    programs::TcContext,
};
use juneau_common::DropReason;

use crate::{fib, ipv4::Ipv4};

#[inline(always)]
pub fn to_outside(ctx: &TcContext, ingress: u32, ip: &Ipv4) -> Result<i32, DropReason> {
    if ip.ttl <= 1 {
        return Ok(TC_ACT_OK);
    }
    let found = fib::lookup(
        ctx,
        ingress,
        ip.saddr,
        ip.daddr,
        ip.proto,
        ip.tot_len as u16,
    );
    if found.rc != BPF_FIB_LKUP_RET_SUCCESS as i64 {
        return Ok(TC_ACT_OK);
    }
    fib::hop(ctx, &found.req)?;
    // SAFETY: plain helper call.
    Ok(unsafe { bpf_redirect(found.req.ifindex, 0) } as i32)
}
