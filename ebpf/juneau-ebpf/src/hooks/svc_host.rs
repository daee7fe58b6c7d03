//! `svc_host`, the ingress of the peer of the Node's Service device (a tc filter): a
//! packet the Node's stack routed to this Node's Service source address (SVC-02). The
//! reply of a translated connection gets its client back as destination and goes to
//! the client's port; anything else is dropped (`NOT_A_REPLY`).
//!
//! ```text
//! ipv4, ports -> the ZONE_HOST entry (REPLY|SNAT: the client, its port, its zone), moved
//!   -> deliver::to_neighbour (the client's MAC, its gateway MAC, its port)
//!   -> xlate::destination_of (the client's address and port)
//!   -> MACs -> deliver::to_port (deliver_svc gives the source its ClusterIP back)
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{CT_F_REPLY, CT_F_SNAT, CtKey, ZONE_HOST},
};

use crate::{conntrack, deliver, eth, ipv4, l4, xlate};

#[inline(always)]
pub fn run(ctx: &TcContext) -> Result<i32, DropReason> {
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
