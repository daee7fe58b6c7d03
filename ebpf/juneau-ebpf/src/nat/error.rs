//! An ICMP error from outside about a packet a NATGateway translated (NAT-01): it is
//! sent to the Node's address and quotes that address and port as the source, so the
//! client's socket would never learn of it. As `nf_nat` does for masquerade: the error
//! goes to the client, its quoted source and port (an echo's identifier) become the
//! client's again, and every checksum that covers them follows (the quoted header's, a
//! quoted UDP or echo checksum, the error's own, the outer header's). Computed in
//! registers and stored directly: no helper call, so the packet pointers stay valid.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{CT_F_NAT, CT_F_REPLY, PROTO_ICMP, PROTO_SCTP, PROTO_TCP, PROTO_UDP, ZONE_HOST},
};

use crate::{
    conntrack,
    eth::{ETH_HLEN, load, store},
    ipv4::{Ipv4, csum_replace, csum_replace32},
    quoted::{self, END, ICMP_CSUM, INNER, INNER_L4},
};

const IP_CSUM: usize = ETH_HLEN + 10;
const IP_SADDR: usize = ETH_HLEN + 12;
const IP_DADDR: usize = ETH_HLEN + 16;

/// The client an error belongs to: its zone and address, once the error is rewritten
/// for it. `None`: not an error about a NATGateway connection of this Node.
pub struct Client {
    pub zone: u32,
    pub addr: u32,
}

/// Whether a quoted packet of `proto` can be given its sender back: one with ports or
/// an echo (what `quoted::read` reads of ICMP).
#[inline(always)]
pub fn mappable(proto: u8) -> bool {
    matches!(proto, PROTO_TCP | PROTO_UDP | PROTO_SCTP | PROTO_ICMP)
}

#[inline(always)]
pub fn translate(ctx: &TcContext, ip: &Ipv4) -> Result<Option<Client>, DropReason> {
    let Some(q) = quoted::read(ctx, ip) else {
        return Ok(None);
    };
    if !mappable(q.proto) || ip.daddr != q.saddr {
        return Ok(None);
    }
    // The quoted packet went nat address -> server: its connection's reply entry is
    // keyed the other way, in ZONE_HOST.
    let Some(entry) = conntrack::lookup(&q.reply_key(ZONE_HOST)) else {
        return Ok(None);
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
        return Ok(None);
    }
    Ok(give_back(ctx, ip, &q, client, Some(client_port)).map(|()| Client { zone, addr: client }))
}

/// The error `ip` quoting `q` goes to `client`: the quoted source becomes `client`
/// (and its port, or an echo's identifier, `port`: NAPT's; `None` keeps it, as 1:1
/// does), with every checksum that covers them. `None`: the quote is not in the
/// packet.
#[inline(always)]
pub fn give_back(
    ctx: &TcContext,
    ip: &Ipv4,
    q: &quoted::Quoted,
    client: u32,
    port: Option<u16>,
) -> Option<()> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + END > end {
        return None;
    }
    // SAFETY: [start, start + END) is inside the packet, checked above (and by
    // `quoted::read`; nothing has changed the packet since).
    unsafe {
        let mut icmp_csum = load::<u16>(start + ICMP_CSUM);
        let udp_port = port.filter(|_| q.proto == PROTO_UDP).map(|p| (q.sport, p));
        icmp_csum = quoted_addr(start, icmp_csum, q.proto, 12, (q.saddr, client), udp_port);
        match port {
            // The ports (an echo's identifier) kept.
            None => {}
            Some(client_port) if q.proto == PROTO_ICMP => {
                // The quoted echo's identifier, and its own checksum (no
                // pseudo-header).
                let old_sum = load::<u16>(start + INNER_L4 + 2);
                let new_sum = csum_replace(old_sum, q.sport, client_port);
                store::<u16>(start + INNER_L4 + 2, new_sum);
                store::<u16>(start + INNER_L4 + 4, client_port);
                icmp_csum = csum_replace(icmp_csum, old_sum, new_sum);
                icmp_csum = csum_replace(icmp_csum, q.sport, client_port);
            }
            Some(client_port) => {
                store::<u16>(start + INNER_L4, client_port);
                icmp_csum = csum_replace(icmp_csum, q.sport, client_port);
            }
        }
        store::<u16>(start + ICMP_CSUM, icmp_csum);
        // The error itself goes to the client.
        let csum = load::<u16>(start + IP_CSUM);
        store::<u16>(start + IP_CSUM, csum_replace32(csum, ip.daddr, client));
        store::<u32>(start + IP_DADDR, client);
    }
    Some(())
}

/// The mirror of [`give_back`] for 1:1's way out (NAT-03): an error a Pod sends about a
/// packet it received on its ElasticIP quotes its own address as the destination;
/// that and the error's source become `public`, with every checksum that covers them
/// (the ports are kept). `None`: the quote is not in the packet.
#[inline(always)]
pub fn give_out(ctx: &TcContext, ip: &Ipv4, q: &quoted::Quoted, public: u32) -> Option<()> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + END > end {
        return None;
    }
    // SAFETY: [start, start + END) is inside the packet, checked above (and by
    // `quoted::read`; nothing has changed the packet since).
    unsafe {
        let icmp_csum = load::<u16>(start + ICMP_CSUM);
        let icmp_csum = quoted_addr(start, icmp_csum, q.proto, 16, (q.daddr, public), None);
        store::<u16>(start + ICMP_CSUM, icmp_csum);
        let csum = load::<u16>(start + IP_CSUM);
        store::<u16>(start + IP_CSUM, csum_replace32(csum, ip.saddr, public));
        store::<u32>(start + IP_SADDR, public);
    }
    Some(())
}

/// One address of the quoted header (at `at` in it: 12 the source, 16 the destination)
/// `old` -> `new`, with the quoted header's checksum (the pair leaves the error's own
/// checksum as it is), and a quoted UDP checksum, which covers the address (and, with
/// `port`, a port changing too), unless it is 0 (none). Returns the error's checksum
/// given the UDP checksum's change.
///
/// # Safety
/// `[start, start + END)` is inside the packet.
#[inline(always)]
unsafe fn quoted_addr(
    start: usize,
    icmp_csum: u16,
    proto: u8,
    at: usize,
    (old, new): (u32, u32),
    port: Option<(u16, u16)>,
) -> u16 {
    // SAFETY: inside [start, start + END), as the caller guarantees.
    unsafe {
        let inner_csum = load::<u16>(start + INNER + 10);
        store::<u16>(start + INNER + 10, csum_replace32(inner_csum, old, new));
        store::<u32>(start + INNER + at, new);
        if proto != PROTO_UDP {
            return icmp_csum;
        }
        let before = load::<u16>(start + INNER_L4 + 6);
        if before == 0 {
            return icmp_csum;
        }
        let mut after = csum_replace32(before, old, new);
        if let Some((p0, p1)) = port {
            after = csum_replace(after, p0, p1);
        }
        let after = if after == 0 { 0xffff } else { after };
        store::<u16>(start + INNER_L4 + 6, after);
        csum_replace(icmp_csum, before, after)
    }
}
