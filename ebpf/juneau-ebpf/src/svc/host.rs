//! Backends outside every Subnet (SVC-02: a Node's address, the API server's), reached
//! through the Node's own stack with the source translated to this Node's Service
//! source address (`jn_svc_host`):
//!
//! ```text
//! Pod --port_ingress/gw_route--> [DNAT + SNAT] --redirect ingress--> Service device
//!   --> the Node's stack routes it (a local socket, or out the underlay)
//! reply to the source address --route via the Service device--> its peer's ingress:
//!   svc_host (hooks/svc_host.rs): [ZONE_HOST entry] destination = the client again
//!   --> deliver::to_port
//!   --> deliver_svc gives the source the ClusterIP back, as for any Service reply
//! ```
use aya_ebpf::{helpers::bpf_redirect, programs::TcContext};
use juneau_common::{DropReason, svc::SvcHost};

use crate::maps;

const BPF_F_INGRESS: u64 = 1;

/// A translated packet (source and destination) into the Node's stack: the Service
/// device's MAC as destination, so the stack takes it as its own, then into that
/// device's ingress.
#[inline(always)]
pub fn to_host(ctx: &TcContext) -> Result<i32, DropReason> {
    // SAFETY: copied at once.
    let cfg: SvcHost = maps::jn_svc_host
        .get(0)
        .copied()
        .ok_or(DropReason::NoSourceAddress)?;
    if cfg.ifindex == 0 {
        return Err(DropReason::NoSourceAddress);
    }
    ctx.store(0, &cfg.mac.mac, 0)
        .map_err(|_| DropReason::NatFailed)?;
    // SAFETY: a plain helper call.
    Ok(unsafe { bpf_redirect(cfg.ifindex, BPF_F_INGRESS) } as i32)
}
