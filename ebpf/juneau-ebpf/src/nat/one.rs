//! 1:1 NAT of an ElasticIP attached to a Subnet NIC (NAT-03): addresses rewritten in
//! both directions, never ports, with no state of its own. The mapping is the
//! ElasticIP's `jn_eip_direct` entry (`pod_ip` set: attached) on the way in, and the
//! port's `public_ip` on the way out; what is per connection (policy's pair in the
//! Pod's zone) stays in the one connection table, where the Pod sees its outside
//! client's own address.
//!
//! ```text
//! eip_uplink: jn_eip_direct[dst] with pod_ip -> inbound: dst EIP -> Pod (an ICMP
//!             error's quote too), then carried as the router would: one hop, from
//!             the Subnet's gateway MAC, to the NIC's port here or its Node
//! gw_forward: ROUTE_INTERNET_GW, port.public_ip -> nat_out in 1:1 mode: src Pod ->
//!             EIP (an ICMP error's quote too), the Node's FIB, the hop
//! ```
use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{DropReason, EipEntry, ct::CT_F_NAT};

use crate::{conntrack, ipv4::Ipv4, l4, quoted, xlate};

/// An outside packet to an attached ElasticIP, on the Node that answers for it (or
/// any Node it lands on): given the Pod's address, then handed to `carry` (the hook's
/// way to the NIC: `eip::carry::to_attached`).
#[inline(always)]
pub fn inbound(
    ctx: &TcContext,
    entry: &EipEntry,
    ip: &Ipv4,
    carry: impl FnOnce() -> Result<i32, DropReason>,
) -> Result<i32, DropReason> {
    if ip.ttl <= 1 {
        // The Node's stack answers with time exceeded, untranslated.
        return Ok(TC_ACT_OK);
    }
    if !l4::plain_header(ctx) {
        // IPv4 options: the transport header is not where the rewrite would go.
        return Err(DropReason::EipNatUnmappable);
    }
    if quoted::is_error(ctx, ip) {
        // An error about what the Pod sent from the ElasticIP: its quote and the
        // error itself given the Pod's address (any quoted protocol: 1:1 keeps the
        // ports, so nothing else needs reading).
        let q = quoted::read(ctx, ip).ok_or(DropReason::EipNatUnmappable)?;
        if q.saddr != ip.daddr {
            return Err(DropReason::EipNatUnmappable);
        }
        super::error::give_back(ctx, ip, &q, entry.pod_ip, None)
            .ok_or(DropReason::EipNatUnmappable)?;
    } else {
        xlate::destination_addr(ctx, ip, entry.pod_ip)?;
    }
    carry()
}

/// A Subnet NIC's packet leaving by 1:1 (`nat_out` in its mode, the way out found):
/// its source becomes the ElasticIP. An ICMP error the Pod sends (a port unreachable
/// to an outside client) quotes the Pod's address, which becomes the ElasticIP too;
/// one quoting anything else cannot be mapped.
#[inline(always)]
pub fn outbound(ctx: &TcContext, ip: &Ipv4, public: u32) -> Result<(), DropReason> {
    if !l4::plain_header(ctx) {
        return Err(DropReason::EipNatUnmappable);
    }
    if quoted::is_error(ctx, ip) {
        let q = quoted::read(ctx, ip).ok_or(DropReason::EipNatUnmappable)?;
        if q.daddr != ip.saddr {
            return Err(DropReason::EipNatUnmappable);
        }
        return super::error::give_out(ctx, ip, &q, public).ok_or(DropReason::EipNatUnmappable);
    }
    xlate::source_addr(ctx, ip, public)
}

/// Whether the packet belongs to a connection the NATGateway already maps (made before
/// the ElasticIP was attached): it keeps that mapping until it ends, since its server
/// would reset a connection whose source changed. One lookup of the connection's
/// entry in the NIC's zone; a later fragment by its datagram's ports as its first
/// fragment recorded them (`frag::ports`), so that a datagram is never split between
/// two sources.
#[inline(always)]
pub fn napt_mapped(ctx: &TcContext, zone: u32, ip: &Ipv4) -> bool {
    let Some(ports) = crate::frag::ports(ctx, ip, zone) else {
        return false;
    };
    let key = crate::conntrack::key_of(zone, ip, &ports);
    // SAFETY: a map value pointer, read at once.
    conntrack::lookup(&key).is_some_and(|e| unsafe { (*e).flags } & CT_F_NAT != 0)
}
