//! The router's ICMP: echo replies from a gateway address, and the errors a router
//! owes its senders (time exceeded, so `traceroute` shows the gateway; fragmentation
//! needed with the next segment's MTU, so path MTU discovery works across segments;
//! network and host unreachable, so a sender learns at once instead of timing out).
//! Built in place and sent back to the port the packet came from: the sender is always
//! on this Node (every Node is the gateway of its own workloads).
mod reset;

use aya_ebpf::{
    bindings::bpf_adj_room_mode::BPF_ADJ_ROOM_MAC,
    helpers::{bpf_ktime_get_ns, bpf_skb_adjust_room, bpf_skb_change_tail},
    programs::TcContext,
};
use juneau_common::{
    DropReason, GwSegment, PortConfig,
    gw::{GwStat, ICMP_ERRORS_PER_SEC},
};

use crate::{
    deliver::to_port,
    eth::{self, ETH_HLEN, load, store},
    ipv4::{Ipv4, csum_replace},
    maps,
};

const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_DEST_UNREACH: u8 = 3;
const ICMP_ECHO: u8 = 8;
const ICMP_TIME_EXCEEDED: u8 = 11;
const IPPROTO_ICMP: u8 = 1;
/// The TTL of what the router sends (as Linux's default).
const TTL: u8 = 64;
/// A new IPv4 header and ICMP header in front of the quote.
const GROW: usize = 28;
/// The quote: the offending packet's IPv4 header (without options) and the first 8
/// bytes of its payload (RFC 792), enough for the sender to find its socket.
const QUOTE: usize = 28;
/// A TCP segment's quote: its whole 20-byte header (RFC 1812 allows more than 8
/// bytes). A segment a local socket sent carries CHECKSUM_PARTIAL, and the kernel
/// refuses to cut such a packet short of its checksum field (16 bytes into the TCP
/// header): with the 8-byte quote no error could be sent for TCP at all, and a
/// connecting client waited out its time-out.
const QUOTE_TCP: usize = 40;
const IPPROTO_TCP: u8 = 6;
/// Errors a CPU may save up.
const BURST: u64 = 100;

#[derive(Clone, Copy)]
pub enum IcmpError {
    TimeExceeded,
    /// Fragmentation needed, with the next hop's MTU.
    FragNeeded(u32),
    /// No route: destination network unreachable.
    NetUnreachable,
    /// No neighbour for the address: destination host unreachable (what a router
    /// whose ARP went unanswered says; this one never asks, L2-18).
    HostUnreachable,
    /// A Service without a backend that takes connections: port unreachable, from the
    /// ClusterIP (what kube-proxy's reject says).
    PortUnreachable(u32),
    /// Refused by the gateway for `reason` (a NATGateway with no address here or no
    /// port free): communication administratively prohibited (code 13), which Linux
    /// reports to a connecting socket at once (EHOSTUNREACH) instead of a time-out.
    Refused(DropReason),
}

/// The checksum of `N` 16-bit words read raw from the packet at `at` (in memory order).
///
/// # Safety
/// `at..at + 2 * N` must be inside the packet.
#[inline(always)]
unsafe fn csum_words<const N: usize>(at: usize) -> u16 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i < N {
        // SAFETY: per the caller.
        sum += unsafe { load::<u16>(at + 2 * i) } as u32;
        i += 1;
    }
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// Answers an echo request to a gateway address in place: addresses swapped, type 0,
/// both checksums updated, back to the sender.
#[inline(always)]
pub fn echo_reply(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
) -> Result<i32, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    let icmp = ETH_HLEN + 20;
    if start + icmp + 8 > end {
        return Err(DropReason::NotForRouter);
    }
    // SAFETY (every load and store): inside [start, start + icmp + 8), checked above.
    unsafe {
        // Only whole packets (neither more fragments nor an offset: a reply to a
        // first fragment would keep its MF bit; a later one has no ICMP header).
        if load::<u8>(start + ETH_HLEN) != 0x45
            || load::<u16>(start + ETH_HLEN + 6) & 0xff3f != 0
            || load::<u8>(start + icmp) != ICMP_ECHO
            || load::<u8>(start + icmp + 1) != 0
        {
            // Only echo requests, and only without IPv4 options.
            return Err(DropReason::NotForRouter);
        }
        let type_code = load::<u16>(start + icmp);
        let reply = ((ICMP_ECHO_REPLY as u16) << 8).to_be();
        let csum = load::<u16>(start + icmp + 2);
        store::<u16>(start + icmp, reply);
        store::<u16>(start + icmp + 2, csum_replace(csum, type_code, reply));
        let (saddr, daddr) = (
            load::<u32>(start + ETH_HLEN + 12),
            load::<u32>(start + ETH_HLEN + 16),
        );
        store::<u32>(start + ETH_HLEN + 12, daddr);
        store::<u32>(start + ETH_HLEN + 16, saddr);
        let ttl_proto = load::<u16>(start + ETH_HLEN + 8);
        let new = (ttl_proto & 0xff00) | TTL as u16;
        let csum = load::<u16>(start + ETH_HLEN + 10);
        store::<u16>(start + ETH_HLEN + 8, new);
        store::<u16>(start + ETH_HLEN + 10, csum_replace(csum, ttl_proto, new));
        let (src_lo, src_hi) = (load::<u32>(start + 6), load::<u16>(start + 10));
        let gw = eth::bits(&seg.gw_mac);
        store::<u32>(start, src_lo);
        store::<u16>(start + 4, src_hi);
        store::<u32>(start + 6, gw as u32);
        store::<u16>(start + 10, (gw >> 32) as u16);
    }
    crate::stats::gw(GwStat::EchoReplies);
    to_port(ctx, ifindex, port.flags)
}

/// One error from this CPU's budget (RFC 1812 4.3.2.8: rate limited); resets
/// (`reset.rs`) share it.
#[inline(always)]
pub(super) fn take_token() -> bool {
    let Some(bucket) = maps::jn_gw_icmp.get_ptr_mut(0) else {
        return false;
    };
    // SAFETY: per-CPU value, only this CPU touches it while the program runs.
    let bucket = unsafe { &mut *bucket };
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    let earned = now.wrapping_sub(bucket.last_ns) * ICMP_ERRORS_PER_SEC / 1_000_000_000;
    if earned > 0 {
        bucket.tokens = (bucket.tokens + earned).min(BURST);
        bucket.last_ns = now;
    }
    if bucket.tokens == 0 {
        return false;
    }
    bucket.tokens -= 1;
    true
}

/// Turns the packet into an ICMP error to its sender, from the gateway of the segment
/// it came from, quoting its header and first 8 bytes. Never for an ICMP error, a
/// later fragment or a packet with IPv4 options (RFC 1812 4.3.2.7); the packet is
/// dropped under the reason either way when no error is sent.
#[inline(always)]
pub fn error(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
    ip: &Ipv4,
    kind: IcmpError,
) -> Result<i32, DropReason> {
    let (reason, icmp_type, code, rest) = match kind {
        IcmpError::TimeExceeded => (DropReason::TtlExceeded, ICMP_TIME_EXCEEDED, 0u8, 0u32),
        IcmpError::FragNeeded(mtu) => {
            (DropReason::FragNeeded, ICMP_DEST_UNREACH, 4u8, mtu & 0xffff)
        }
        IcmpError::NetUnreachable => (DropReason::NoRoute, ICMP_DEST_UNREACH, 0u8, 0u32),
        IcmpError::HostUnreachable => (DropReason::NoNeighbour, ICMP_DEST_UNREACH, 1u8, 0u32),
        IcmpError::PortUnreachable(_) => (DropReason::SvcNoEndpoints, ICMP_DEST_UNREACH, 3u8, 0u32),
        IcmpError::Refused(reason) => (reason, ICMP_DEST_UNREACH, 13u8, 0u32),
    };
    // A refused TCP connection is told by a reset, which its socket takes at once
    // (`reset.rs` says why an ICMP error waits for the SYN's retransmission).
    if matches!(kind, IcmpError::PortUnreachable(_) | IcmpError::Refused(_))
        && reset::answers(ctx, ip)
    {
        return reset::send(ctx, ifindex, port, seg, ip, reason);
    }
    let from = match kind {
        IcmpError::PortUnreachable(service) => service,
        _ => seg.gw_ip,
    };
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + QUOTE > end {
        return Err(reason);
    }
    // SAFETY: inside [start, start + ETH_HLEN + QUOTE), checked above.
    let (ver_ihl, inner_type) = unsafe {
        (
            load::<u8>(start + ETH_HLEN),
            load::<u8>(start + ETH_HLEN + 20),
        )
    };
    let later_fragment = u16::from_be(ip.frag) & 0x1fff != 0;
    let icmp_error = ip.proto == IPPROTO_ICMP && inner_type != ICMP_ECHO;
    if ver_ihl != 0x45 || later_fragment || icmp_error || !take_token() {
        if ver_ihl == 0x45 && !later_fragment && !icmp_error {
            crate::stats::gw(GwStat::IcmpSuppressed);
        }
        return Err(reason);
    }
    // SAFETY: as above.
    let (mac_lo, mac_hi) = unsafe { (load::<u32>(start + 6), load::<u16>(start + 10)) };
    let skb = ctx.skb.skb;
    // Keep the quote, then open room for the new headers behind the Ethernet header.
    // SAFETY: plain helper calls on the program's context.
    let long = ip.proto == IPPROTO_TCP && start + ETH_HLEN + QUOTE_TCP <= end;
    let quote = if long { QUOTE_TCP } else { QUOTE };
    if unsafe { bpf_skb_change_tail(skb, (ETH_HLEN + quote) as u32, 0) } != 0
        || unsafe { bpf_skb_adjust_room(skb, GROW as i32, BPF_ADJ_ROOM_MAC, 0) } != 0
    {
        return Err(reason);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    let ip_at = ETH_HLEN;
    let icmp_at = ETH_HLEN + 20;
    if start + ETH_HLEN + GROW + QUOTE > end {
        return Err(reason);
    }
    if long && start + ETH_HLEN + GROW + QUOTE_TCP > end {
        return Err(reason);
    }
    let gw = eth::bits(&seg.gw_mac);
    let tot_len = (GROW + quote) as u16;
    // SAFETY (every store and the checksums): inside
    // [start, start + ETH_HLEN + GROW + quote), checked above.
    unsafe {
        store::<u32>(start, mac_lo);
        store::<u16>(start + 4, mac_hi);
        store::<u32>(start + 6, gw as u32);
        store::<u16>(start + 10, (gw >> 32) as u16);
        store::<u16>(start + 12, eth::ETH_P_IP.to_be());
        store::<u16>(start + ip_at, 0x4500u16.to_be());
        store::<u16>(start + ip_at + 2, tot_len.to_be());
        store::<u32>(start + ip_at + 4, 0);
        store::<u16>(
            start + ip_at + 8,
            ((TTL as u16) << 8 | IPPROTO_ICMP as u16).to_be(),
        );
        store::<u16>(start + ip_at + 10, 0);
        store::<u32>(start + ip_at + 12, from);
        store::<u32>(start + ip_at + 16, ip.saddr);
        store::<u16>(start + ip_at + 10, csum_words::<10>(start + ip_at));
        store::<u16>(
            start + icmp_at,
            ((icmp_type as u16) << 8 | code as u16).to_be(),
        );
        store::<u16>(start + icmp_at + 2, 0);
        store::<u32>(start + icmp_at + 4, rest.to_be());
        let sum = if long {
            csum_words::<{ (8 + QUOTE_TCP) / 2 }>(start + icmp_at)
        } else {
            csum_words::<{ (8 + QUOTE) / 2 }>(start + icmp_at)
        };
        store::<u16>(start + icmp_at + 2, sum);
    }
    crate::stats::gw(GwStat::IcmpErrors);
    // The packet itself went no further: counted under its reason all the same.
    crate::stats::drop(reason);
    to_port(ctx, ifindex, port.flags)
}
