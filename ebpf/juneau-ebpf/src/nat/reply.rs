//! A NATGateway connection's replies as they reach the Node's uplink (`eip_uplink`):
//! the entry in `ZONE_HOST` for the packet (REPLY|NAT) gives the client back, and the
//! packet goes on to the client's port as if routed to it (TTL - 1, its segment's
//! gateway MAC as source), through the delivery stage (the receiver's side of policy).
//! Anything else to the uplink is not NAT's and passes on: to `otherwise`, the
//! hook's say (a Service's SVC-02 replies go to the Node's stack; an unheld address
//! of an announced pool is dropped).
use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{
    DropReason,
    ct::{CT_F_NAT, CT_F_REPLY, CtKey, PROTO_ICMP, ZONE_HOST},
};

use crate::{conntrack, deliver, frag, ipv4::Ipv4, maps, neighbour, xlate};

#[inline(always)]
pub fn to_client(
    ctx: &TcContext,
    ip: &Ipv4,
    otherwise: impl FnOnce() -> Result<i32, DropReason>,
) -> Result<i32, DropReason> {
    if ip.proto == PROTO_ICMP
        && ip.ttl > 1
        && let Some(client) = super::error::translate(ctx, ip)?
    {
        return deliver(ctx, client.zone, client.addr);
    }
    let Some(ports) = frag::ports(ctx, ip, ZONE_HOST) else {
        return unmatched(ip, otherwise);
    };
    let key = CtKey::new(
        ZONE_HOST,
        ip.saddr,
        ip.daddr,
        ports.sport,
        ports.dport,
        ip.proto,
    );
    let Some(entry) = conntrack::lookup(&key) else {
        return unmatched(ip, otherwise);
    };
    // SAFETY: a map value pointer, read at once.
    let (flags, client, client_port, zone) = unsafe {
        (
            (*entry).flags,
            (*entry).nat_ip,
            (*entry).nat_port,
            (*entry).nat_zone,
        )
    };
    if flags & (CT_F_REPLY | CT_F_NAT) != CT_F_REPLY | CT_F_NAT {
        return Ok(TC_ACT_OK);
    }
    if ip.ttl <= 1 {
        // The stack answers as a router would (time exceeded).
        return Ok(TC_ACT_OK);
    }
    // The original direction, as the client sent it: its first reply establishes it.
    let fwd_key = CtKey::new(zone, client, ip.saddr, client_port, ports.sport, ip.proto);
    conntrack::answered(entry, &fwd_key, ip.proto, ports.tcp_flags);
    xlate::destination(ctx, ip, &ports, client, client_port)?;
    if ip.proto == PROTO_ICMP && !frag::later(ip) {
        xlate::icmp_id(ctx, ports.dport, client_port)?;
    }
    deliver(ctx, zone, client)
}

/// Not a reply of this Node's connections: dropped when it is to an address the Node
/// answers ARP for outside (its NATGateway address), which nothing else takes; else
/// `otherwise`.
#[inline(always)]
fn unmatched(
    ip: &Ipv4,
    otherwise: impl FnOnce() -> Result<i32, DropReason>,
) -> Result<i32, DropReason> {
    // SAFETY: a plain lookup, nothing kept.
    if unsafe { maps::jn_ext_arp.get(ip.daddr) }.is_some() {
        return Err(DropReason::NatNoMapping);
    }
    otherwise()
}

/// The translated packet on to the client's port, as if routed to it.
#[inline(always)]
fn deliver(ctx: &TcContext, zone: u32, client: u32) -> Result<i32, DropReason> {
    let to = deliver::to_neighbour(zone, client)?;
    neighbour::hop(ctx, &to.mac, &to.gw_mac)?;
    deliver::to_port(ctx, to.port.ifindex, to.port.flags)
}
