//! A TCP reset in place of an ICMP refusal: a Service without endpoints, a NATGateway
//! that cannot take the connection. Linux takes an ICMP error that arrives while the
//! connecting process still holds its socket (the SYN's own softirq, which is when a
//! datapath's answer comes) as a soft error, and the client waits for its first
//! retransmission (one second) to be told; a RST is queued to the socket's backlog and
//! refuses the connection as soon as `connect` lets go of it (ECONNREFUSED at once, as
//! kube-proxy's reject and netfilter's `reject with tcp reset` give).
//!
//! Built in place: the segment cut to its 20-byte header, addresses and ports swapped,
//! RST|ACK acknowledging what it carried (SEQ the segment's ACK when it had one), both
//! checksums computed anew, sent back to the port it came from.
use aya_ebpf::{helpers::bpf_skb_change_tail, programs::TcContext};
use juneau_common::{DropReason, GwSegment, PortConfig, gw::GwStat};

use crate::{
    deliver::to_port,
    eth::{self, ETH_HLEN, load, store},
    ipv4::Ipv4,
};

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;
const IPPROTO_TCP: u8 = 6;
const TTL: u8 = 64;
/// The reset's IPv4 and TCP headers, no options.
const LEN: usize = 40;

/// Whether `ip` is a TCP segment a reset answers: not itself a reset, not a later
/// fragment, with a plain 20-byte IPv4 header.
#[inline(always)]
pub fn answers(ctx: &TcContext, ip: &Ipv4) -> bool {
    let (start, end) = (ctx.data(), ctx.data_end());
    if ip.proto != IPPROTO_TCP || start + ETH_HLEN + LEN > end {
        return false;
    }
    // SAFETY: inside [start, start + ETH_HLEN + LEN), checked above.
    let (ver_ihl, flags) = unsafe {
        (
            load::<u8>(start + ETH_HLEN),
            load::<u8>(start + ETH_HLEN + 33),
        )
    };
    ver_ihl == 0x45 && u16::from_be(ip.frag) & 0x1fff == 0 && flags & TCP_RST == 0
}

/// The reset for the segment in `ctx` (checked by [`answers`]), from `from` (the
/// address it was sent to, or the ClusterIP), counted under `reason`.
#[inline(always)]
pub fn send(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
    ip: &Ipv4,
    reason: DropReason,
) -> Result<i32, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + LEN > end {
        return Err(reason);
    }
    let (l3, l4) = (ETH_HLEN, ETH_HLEN + 20);
    // SAFETY: inside [start, start + ETH_HLEN + LEN), checked above.
    let (sport, dport, seq, ack, flags, doff, mac_lo, mac_hi) = unsafe {
        (
            load::<u16>(start + l4),
            load::<u16>(start + l4 + 2),
            u32::from_be(load::<u32>(start + l4 + 4)),
            load::<u32>(start + l4 + 8),
            load::<u8>(start + l4 + 13),
            (load::<u8>(start + l4 + 12) >> 4) as u32 * 4,
            load::<u32>(start + 6),
            load::<u16>(start + 10),
        )
    };
    // What the segment occupied of the sequence space: its data, SYN and FIN.
    let data = if doff < 20 {
        0
    } else {
        ip.tot_len.saturating_sub(20 + doff)
    };
    let used = data + (flags & TCP_SYN != 0) as u32 + (flags & TCP_FIN != 0) as u32;
    // RFC 793: SEQ is the segment's ACK when it had one; the reset acknowledges it.
    let seq_out = if flags & TCP_ACK != 0 { ack } else { 0 };
    let ack_out = seq.wrapping_add(used).to_be();
    if !super::take_token() {
        return Err(reason);
    }
    // SAFETY: a plain helper call on the program's context.
    if unsafe { bpf_skb_change_tail(ctx.skb.skb, (ETH_HLEN + LEN) as u32, 0) } != 0 {
        return Err(reason);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + LEN > end {
        return Err(reason);
    }
    let gw = eth::bits(&seg.gw_mac);
    let (saddr, daddr) = (ip.daddr, ip.saddr);
    // SAFETY (every store and load): inside [start, start + ETH_HLEN + LEN), checked.
    unsafe {
        store::<u32>(start, mac_lo);
        store::<u16>(start + 4, mac_hi);
        store::<u32>(start + 6, gw as u32);
        store::<u16>(start + 10, (gw >> 32) as u16);
        store::<u16>(start + l3, 0x4500u16.to_be());
        store::<u16>(start + l3 + 2, (LEN as u16).to_be());
        store::<u32>(start + l3 + 4, 0);
        store::<u16>(
            start + l3 + 8,
            ((TTL as u16) << 8 | IPPROTO_TCP as u16).to_be(),
        );
        store::<u16>(start + l3 + 10, 0);
        store::<u32>(start + l3 + 12, saddr);
        store::<u32>(start + l3 + 16, daddr);
        store::<u16>(start + l3 + 10, fold(words::<10>(start + l3)));
        store::<u16>(start + l4, dport);
        store::<u16>(start + l4 + 2, sport);
        store::<u32>(start + l4 + 4, seq_out);
        store::<u32>(start + l4 + 8, ack_out);
        store::<u16>(
            start + l4 + 12,
            (0x5000u16 | (TCP_RST | TCP_ACK) as u16).to_be(),
        );
        store::<u32>(start + l4 + 14, 0); // window 0, checksum 0
        store::<u16>(start + l4 + 18, 0);
        // The pseudo-header (addresses, zero and protocol, length) and the header,
        // every word as it lies in memory.
        let proto_word = (IPPROTO_TCP as u16).to_be() as u32;
        let len_word = 20u16.to_be() as u32;
        let pseudo = (saddr >> 16)
            + (saddr & 0xffff)
            + (daddr >> 16)
            + (daddr & 0xffff)
            + proto_word
            + len_word;
        store::<u16>(start + l4 + 16, fold(words::<10>(start + l4) + pseudo));
    }
    crate::stats::gw(GwStat::IcmpErrors);
    crate::stats::drop(reason);
    to_port(ctx, ifindex, port.flags)
}

/// The one's-complement sum of `N` 16-bit words read raw at `at` (not folded).
///
/// # Safety
/// `at..at + 2 * N` must be inside the packet.
#[inline(always)]
unsafe fn words<const N: usize>(at: usize) -> u32 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i < N {
        // SAFETY: per the caller.
        sum += unsafe { load::<u16>(at + 2 * i) } as u32;
        i += 1;
    }
    sum
}

/// Folds a sum to 16 bits and complements it: the checksum field's value.
#[inline(always)]
fn fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}
