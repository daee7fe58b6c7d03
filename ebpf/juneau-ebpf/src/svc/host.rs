//! Backends outside every Subnet (SVC-02: a Node's address, the API server's), reached
//! through the Node's own stack with the source translated to this Node's Service
//! source address (`jn_svc_host`):
//!
//! ```text
//! Pod --port_ingress/gw_route--> [DNAT + SNAT] --redirect ingress--> Service device
//!   --> the Node's stack routes it (a local socket, or out the underlay)
//! reply to the source address --route via the Service device--> its peer's ingress:
//!   svc_host: [ZONE_HOST entry] destination = the client again --> deliver::to_port
//!   --> deliver_svc gives the source the ClusterIP back, as for any Service reply
//! ```
use aya_ebpf::{helpers::bpf_redirect, programs::TcContext};
use juneau_common::{
    DropReason,
    ct::{CT_F_REPLY, CT_F_SNAT, CtKey, ZONE_HOST},
    svc::SvcHost,
};

use crate::{conntrack, deliver, eth, ipv4, l4, maps, xlate};

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

/// `svc_host`: a packet the Node's stack routed to this Node's Service source address.
/// The reply of a translated connection gets its client back as destination and goes
/// to the client's port; anything else is dropped (`NOT_A_REPLY`).
#[inline(always)]
pub fn reply(ctx: &TcContext) -> Result<i32, DropReason> {
    let ip = ipv4::read(ctx)?;
    let ports = l4::read(ctx, &ip).ok_or(DropReason::NotAReply)?;
    let key = CtKey::new(
        ZONE_HOST,
        ip.saddr,
        ip.daddr,
        ports.sport,
        ports.dport,
        ip.proto,
    );
    let entry = conntrack::lookup(&key).ok_or(DropReason::NotAReply)?;
    // SAFETY: a map value pointer, read at once.
    let (flags, client_ip, client_port, zone) = unsafe {
        (
            (*entry).flags,
            (*entry).nat_ip,
            (*entry).nat_port,
            (*entry).nat_zone,
        )
    };
    if flags & (CT_F_REPLY | CT_F_SNAT) != CT_F_REPLY | CT_F_SNAT {
        return Err(DropReason::NotAReply);
    }
    conntrack::seen(entry, ip.proto, ports.tcp_flags, true);
    // The client's port: its neighbour entry (MAC), its segment's gateway (the source
    // of everything routed to it) and the segment's learning table (the port).
    let to = deliver::to_neighbour(zone, client_ip)?;
    xlate::destination_of(ctx, ip.proto, ip.daddr, ports.dport, client_ip, client_port)?;
    let macs = eth::Addrs {
        dst: to.mac,
        src: to.gw_mac,
    };
    ctx.store(0, &macs.dst.mac, 0)
        .and_then(|()| ctx.store(6, &macs.src.mac, 0))
        .map_err(|_| DropReason::NatFailed)?;
    deliver::to_port(ctx, to.port.ifindex, to.port.flags)
}
