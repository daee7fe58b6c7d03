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
    if let Some((csum, extra)) = l4_csum(proto) {
        let ports = port_at.map(|(_, old, new)| (old, new));
        if !l4_in_registers(ctx, csum, extra != 0, old_addr, new_addr, ports)? {
            let failed = |_| DropReason::NatFailed;
            ctx.l4_csum_replace(
                csum,
                old_addr as u64,
                new_addr as u64,
                BPF_F_PSEUDO_HDR | extra | 4,
            )
            .map_err(failed)?;
            if let Some((old, new)) = ports
                && old != new
            {
                ctx.l4_csum_replace(csum, old as u64, new as u64, extra | 2)
                    .map_err(failed)?;
            }
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

/// The transport checksum at `at` updated in registers for an address (part of the
/// pseudo-header) and optionally a port changing, when the field is known to hold a
/// full checksum; `Ok(false)` leaves it to the kernel's helper. The helper is what
/// a 1:1 translation spent most of its time in (a third of the path, measured), and
/// all it adds is knowing `skb->ip_summed`, which a program cannot read:
/// - `CHECKSUM_PARTIAL` (a local sender's, or GRO's) keeps in the field the folded sum
///   of the pseudo-header, which the update must move the other way. A field that
///   equals that sum, or a packet of several segments (GSO), goes to the helper; any
///   other field is a full checksum (a full one that happens to equal the sum goes to
///   the helper too, which is right for it as well).
/// - `CHECKSUM_COMPLETE` (a device's sum of the whole packet): the packet's sum
///   changes by what the pseudo-header did, given to `bpf_csum_update`, a no-op for
///   the other kinds.
/// - A UDP field of 0 (no checksum) stays 0, and a computed 0 is sent as 0xffff.
#[inline(always)]
fn l4_in_registers(
    ctx: &TcContext,
    at: usize,
    udp: bool,
    old_addr: u32,
    new_addr: u32,
    ports: Option<(u16, u16)>,
) -> Result<bool, DropReason> {
    // SAFETY: the context pointer is valid for the program's run.
    if unsafe { (*ctx.skb.skb).gso_size } != 0 {
        return Ok(false);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + at + 2 > end {
        return Err(DropReason::NatFailed);
    }
    // SAFETY: [start, start + at + 2) is inside the packet, checked above, and `at` is
    // past the 20-byte IPv4 header.
    let (field, tot_len, proto, saddr, daddr) = unsafe {
        (
            load::<u16>(start + at),
            u16::from_be(load::<u16>(start + ETH_HLEN + 2)),
            load::<u8>(start + ETH_HLEN + 9),
            load::<u32>(start + IP_SADDR),
            load::<u32>(start + IP_DADDR),
        )
    };
    if udp && field == 0 {
        return Ok(true);
    }
    // The pseudo-header's sum, in memory order as the field is loaded.
    let len = u32::from(tot_len.wrapping_sub(20).to_be());
    let pseudo = fold(add32(
        add32(saddr, daddr),
        add32(u32::from(proto) << 8, len),
    ));
    if same_ones(field, pseudo) {
        return Ok(false);
    }
    let mut sum = crate::ipv4::csum_replace32(field, old_addr, new_addr);
    if let Some((old, new)) = ports {
        sum = crate::ipv4::csum_replace(sum, old, new);
    }
    if udp && sum == 0 {
        sum = 0xffff;
    }
    // SAFETY: inside the packet, checked above.
    unsafe { store::<u16>(start + at, sum) };
    // The packet's own sum moved by the pseudo-header's change, the other way (the
    // ports' change is cancelled by the field's).
    // SAFETY: plain helper call; a packet without a device sum gets -ENOTSUPP.
    unsafe { aya_ebpf::helpers::bpf_csum_update(ctx.skb.skb, add32(old_addr, !new_addr)) };
    Ok(true)
}

/// A 32-bit ones' complement sum folded to 16 bits (not complemented).
#[inline(always)]
fn fold(sum: u32) -> u16 {
    let sum = (sum & 0xffff) + (sum >> 16);
    ((sum & 0xffff) + (sum >> 16)) as u16
}

/// Equal as ones' complement numbers (0 and 0xffff are both zero).
#[inline(always)]
fn same_ones(a: u16, b: u16) -> bool {
    a == b || ((a == 0 || a == 0xffff) && (b == 0 || b == 0xffff))
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
