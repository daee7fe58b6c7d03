//! The ports of a fragmented datagram (`jn_frag`): its first fragment, the one with the
//! transport header, records them where a stage reads it, by zone, addresses, IP
//! identifier and protocol; its later fragments carry none and are keyed by them. So
//! every fragment of a datagram is its connection's: judged by policy as its first
//! fragment was, translated by a Service as its first was (addresses only: a later
//! fragment holds no port and no transport checksum). A later fragment that comes
//! before its first finds nothing (as in Cilium's fragment tracking).
use aya_ebpf::programs::TcContext;
use juneau_common::ct::{FragKey, FragPorts, PROTO_ICMP, PROTO_SCTP, PROTO_TCP, PROTO_UDP};

use crate::{ipv4::Ipv4, l4, maps};

/// The More Fragments bit of the fragment word (host order).
const IP_MORE_FRAGMENTS: u16 = 0x2000;
/// The offset bits of the fragment word (host order).
const IP_OFFSET: u16 = 0x1fff;

/// Whether `ip` is a later fragment (no transport header).
#[inline(always)]
pub fn later(ip: &Ipv4) -> bool {
    u16::from_be(ip.frag) & IP_OFFSET != 0
}

/// Whether `ip` is the first fragment of a fragmented datagram.
#[inline(always)]
pub fn first(ip: &Ipv4) -> bool {
    u16::from_be(ip.frag) & (IP_MORE_FRAGMENTS | IP_OFFSET) == IP_MORE_FRAGMENTS
}

#[inline(always)]
fn key(ip: &Ipv4, zone: u32) -> FragKey {
    FragKey {
        zone,
        saddr: ip.saddr,
        daddr: ip.daddr,
        id: ip.id,
        proto: ip.proto,
        pad: 0,
    }
}

/// The packet's ports as `l4::read` gives them, a first fragment's recorded in `zone`
/// on the way; for a later fragment of a protocol with ports (or an echo), its
/// datagram's as recorded (`tcp_flags` 0). `None`: neither.
#[inline(always)]
pub fn ports(ctx: &TcContext, ip: &Ipv4, zone: u32) -> Option<l4::Ports> {
    if let Some(p) = l4::read(ctx, ip) {
        if first(ip) {
            let ports = FragPorts {
                sport: p.sport,
                dport: p.dport,
            };
            // An LRU insert: only a full map's oldest datagram is forgotten.
            let _ = maps::jn_frag.insert(key(ip, zone), ports, 0);
        }
        return Some(p);
    }
    if !later(ip) || !matches!(ip.proto, PROTO_TCP | PROTO_UDP | PROTO_SCTP | PROTO_ICMP) {
        return None;
    }
    // SAFETY: copied at once.
    let ports = unsafe { maps::jn_frag.get(key(ip, zone)) }.copied()?;
    Some(l4::Ports {
        sport: ports.sport,
        dport: ports.dport,
        tcp_flags: 0,
    })
}
