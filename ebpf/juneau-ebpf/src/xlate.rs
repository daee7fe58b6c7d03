//! The address and port rewrites of a translated connection (a Service's, a
//! NATGateway's; ICMP echo's identifier too, which NAPT maps as a port), the transport checksum kept
//! right by the kernel's helpers (which also handle a packet whose transport checksum
//! the sender left to the device: only the pseudo-header part changes then), the IPv4
//! header's own in registers.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{PROTO_TCP, PROTO_UDP},
};

use crate::{
    eth::{ETH_HLEN, load, store},
    ipv4::{Ipv4, csum_replace32},
    l4::{self, Ports},
};

/// The address is part of the transport checksum's pseudo-header.
const BPF_F_PSEUDO_HDR: u64 = 1 << 4;
/// A UDP checksum of 0 (none) stays 0.
const BPF_F_MARK_MANGLED_0: u64 = 1 << 5;
const IP_CSUM: usize = ETH_HLEN + 10;
const IP_SADDR: usize = ETH_HLEN + 12;
const IP_DADDR: usize = ETH_HLEN + 16;

/// The transport checksum's offset and the helper's flags, for the protocols whose
/// checksum covers the ports and the pseudo-header (TCP, UDP); `None` for the others
/// (SCTP's CRC covers no addresses; ICMP's none of either).
#[inline(always)]
fn l4_csum(proto: u8) -> Option<(usize, u64)> {
    match proto {
        PROTO_TCP => Some((l4::TCP_CSUM, 0)),
        PROTO_UDP => Some((l4::UDP_CSUM, BPF_F_MARK_MANGLED_0)),
        _ => None,
    }
}

/// Rewrites one address (at `addr_at`) and, when the transport header has ports and
/// this one changes, the port at `port_at`.
#[inline(always)]
fn rewrite(
    ctx: &TcContext,
    proto: u8,
    addr_at: usize,
    old_addr: u32,
    new_addr: u32,
    port_at: Option<(usize, u16, u16)>,
) -> Result<(), DropReason> {
    let failed = |_| DropReason::NatFailed;
    if let Some((csum, extra)) = l4_csum(proto) {
        ctx.l4_csum_replace(
            csum,
            old_addr as u64,
            new_addr as u64,
            BPF_F_PSEUDO_HDR | extra | 4,
        )
        .map_err(failed)?;
        if let Some((_, old, new)) = port_at
            && old != new
        {
            ctx.l4_csum_replace(csum, old as u64, new as u64, extra | 2)
                .map_err(failed)?;
        }
    }
    // The header's own checksum and the stores: computed in registers and written
    // directly (the IPv4 checksum is never left to a device), with the packet's
    // pointers taken after the helpers above, which may have moved it. Three helper
    // calls fewer a translated packet than storing through the kernel.
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + l4::L4 + 4 > end {
        return Err(DropReason::NatFailed);
    }
    // SAFETY: [start, start + L4 + 4) is inside the packet, checked above; `addr_at`
    // is the source or destination word of the IPv4 header, `port_at` one of the two
    // ports after it.
    unsafe {
        let csum = load::<u16>(start + IP_CSUM);
        store::<u16>(start + IP_CSUM, csum_replace32(csum, old_addr, new_addr));
        store::<u32>(start + addr_at, new_addr);
        if let Some((at, old, new)) = port_at
            && old != new
        {
            store::<u16>(start + at, new);
        }
    }
    Ok(())
}

/// The Service's address and port -> the backend's (the original direction).
#[inline(always)]
pub fn destination(
    ctx: &TcContext,
    ip: &Ipv4,
    ports: &Ports,
    addr: u32,
    port: u16,
) -> Result<(), DropReason> {
    if crate::frag::later(ip) {
        // No transport header: the address alone.
        return rewrite(ctx, 0, IP_DADDR, ip.daddr, addr, None);
    }
    destination_of(ctx, ip.proto, ip.daddr, ports.dport, addr, port)
}

/// A destination `(daddr, dport)` -> `(addr, port)`.
#[inline(always)]
pub fn destination_of(
    ctx: &TcContext,
    proto: u8,
    daddr: u32,
    dport: u16,
    addr: u32,
    port: u16,
) -> Result<(), DropReason> {
    let port_at = (proto != juneau_common::ct::PROTO_ICMP).then_some((l4::L4 + 2, dport, port));
    rewrite(ctx, proto, IP_DADDR, daddr, addr, port_at)
}

/// The backend's address and port -> the Service's (the reply direction).
#[inline(always)]
pub fn source(
    ctx: &TcContext,
    ip: &Ipv4,
    ports: &Ports,
    addr: u32,
    port: u16,
) -> Result<(), DropReason> {
    if crate::frag::later(ip) {
        return rewrite(ctx, 0, IP_SADDR, ip.saddr, addr, None);
    }
    source_of(ctx, ip.proto, ip.saddr, ports.sport, addr, port)
}

/// A source `(saddr, sport)` -> `(addr, port)` (also the translated source of SVC-02).
#[inline(always)]
pub fn source_of(
    ctx: &TcContext,
    proto: u8,
    saddr: u32,
    sport: u16,
    addr: u32,
    port: u16,
) -> Result<(), DropReason> {
    let port_at = (proto != juneau_common::ct::PROTO_ICMP).then_some((l4::L4, sport, port));
    rewrite(ctx, proto, IP_SADDR, saddr, addr, port_at)
}

/// The destination address alone -> `addr` (1:1 NAT, NAT-03: the ports and an echo's
/// identifier are kept).
#[inline(always)]
pub fn destination_addr(ctx: &TcContext, ip: &Ipv4, addr: u32) -> Result<(), DropReason> {
    let proto = if crate::frag::later(ip) { 0 } else { ip.proto };
    rewrite(ctx, proto, IP_DADDR, ip.daddr, addr, None)
}

/// The source address alone -> `addr` (1:1 NAT, NAT-03).
#[inline(always)]
pub fn source_addr(ctx: &TcContext, ip: &Ipv4, addr: u32) -> Result<(), DropReason> {
    let proto = if crate::frag::later(ip) { 0 } else { ip.proto };
    rewrite(ctx, proto, IP_SADDR, ip.saddr, addr, None)
}

/// An ICMP echo's identifier `old` -> `new` (NAPT maps it as a port, NAT-01). The ICMP
/// checksum covers no pseudo-header: a plain 16-bit update of its own word.
#[inline(always)]
pub fn icmp_id(ctx: &TcContext, old: u16, new: u16) -> Result<(), DropReason> {
    if old == new {
        return Ok(());
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + l4::L4 + 8 > end {
        return Err(DropReason::NatFailed);
    }
    // SAFETY: [start, start + L4 + 8) is inside the packet, checked above.
    unsafe {
        let csum = load::<u16>(start + l4::L4 + 2);
        store::<u16>(
            start + l4::L4 + 2,
            crate::ipv4::csum_replace(csum, old, new),
        );
        store::<u16>(start + l4::L4 + 4, new);
    }
    Ok(())
}

/// 32-bit ones' complement addition (end-around carry): the kernel's `csum_add`.
#[inline(always)]
fn add32(a: u32, b: u32) -> u32 {
    let (sum, carry) = a.overflowing_add(b);
    sum.wrapping_add(carry as u32)
}

/// Both ends translated at once, `(saddr, sport)` -> `src` and `(daddr, dport)` -> `dst`
/// (a Service connection whose source is translated too, SVC-02): one checksum update
/// for the two addresses (the pseudo-header) and one for the two ports, from their
/// differences summed in registers, where [`destination`] then [`source`] make two
/// each. A later fragment gets its addresses only.
#[inline(always)]
pub fn both(
    ctx: &TcContext,
    ip: &Ipv4,
    ports: &Ports,
    src: (u32, u16),
    dst: (u32, u16),
) -> Result<(), DropReason> {
    let later = crate::frag::later(ip);
    let with_ports = !later && ip.proto != juneau_common::ct::PROTO_ICMP;
    let (sport, dport) = if with_ports {
        (src.1, dst.1)
    } else {
        (ports.sport, ports.dport)
    };
    let failed = |_| DropReason::NatFailed;
    if let Some((csum, extra)) = l4_csum(if later { 0 } else { ip.proto }) {
        let addrs = add32(add32(!ip.saddr, src.0), add32(!ip.daddr, dst.0));
        // Size 0: the value is a difference already (`csum_diff`'s form).
        ctx.l4_csum_replace(csum, 0, addrs as u64, BPF_F_PSEUDO_HDR | extra)
            .map_err(failed)?;
        if sport != ports.sport || dport != ports.dport {
            let port_diff = add32(
                add32(u32::from(!ports.sport), u32::from(sport)),
                add32(u32::from(!ports.dport), u32::from(dport)),
            );
            ctx.l4_csum_replace(csum, 0, port_diff as u64, extra)
                .map_err(failed)?;
        }
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + l4::L4 + 4 > end {
        return Err(DropReason::NatFailed);
    }
    // SAFETY: [start, start + L4 + 4) is inside the packet, checked above.
    unsafe {
        let sum = load::<u16>(start + IP_CSUM);
        let sum = csum_replace32(sum, ip.saddr, src.0);
        store::<u16>(start + IP_CSUM, csum_replace32(sum, ip.daddr, dst.0));
        store::<u32>(start + IP_SADDR, src.0);
        store::<u32>(start + IP_DADDR, dst.0);
        if with_ports {
            store::<u16>(start + l4::L4, sport);
            store::<u16>(start + l4::L4 + 2, dport);
        }
    }
    Ok(())
}
