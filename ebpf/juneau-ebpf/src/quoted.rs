//! The packet an ICMP error quotes (RFC 792): a destination unreachable (fragmentation
//! needed among them), time exceeded or parameter problem carries the IPv4 header of
//! the packet it answers and the first 8 bytes after it. Policy passes such an error
//! with its connection (`policy::related`); a Service gives it the ClusterIP back
//! (`svc::error`). Read only from a packet whose own IPv4 header is the plain 20
//! bytes, quoting a plain header too.
use aya_ebpf::programs::TcContext;
use juneau_common::ct::{CtKey, PROTO_ICMP, PROTO_SCTP, PROTO_TCP, PROTO_UDP};

use crate::{eth::load, ipv4::Ipv4, l4};

const ICMP_UNREACHABLE: u8 = 3;
const ICMP_TIME_EXCEEDED: u8 = 11;
const ICMP_PARAMETER_PROBLEM: u8 = 12;
const ICMP_SOURCE_QUENCH: u8 = 4;
const ICMP_REDIRECT: u8 = 5;
const ICMP_ECHO: u8 = 8;
const ICMP_ECHO_REPLY: u8 = 0;
/// The error's own checksum (it covers the quoted bytes).
pub const ICMP_CSUM: usize = l4::L4 + 2;
/// The quoted IPv4 header, after the error's 8-byte ICMP header.
pub const INNER: usize = l4::L4 + 8;
/// The quoted transport header.
pub const INNER_L4: usize = INNER + 20;
/// Where the quoted bytes end.
pub const END: usize = INNER_L4 + 8;

/// The quoted packet's tuple, keyed as `l4::read` keys a packet (ports raw; an echo's
/// identifier on the asking side; none for protocols without ports).
pub struct Quoted {
    pub saddr: u32,
    pub daddr: u32,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl Quoted {
    /// The key of the quoted packet's answer in `zone` (the quoted tuple turned
    /// around): the reply entry of its connection there, a Service's too.
    #[inline(always)]
    pub fn reply_key(&self, zone: u32) -> CtKey {
        CtKey::new(
            zone, self.daddr, self.saddr, self.dport, self.sport, self.proto,
        )
    }
}

/// Whether `ip` is an ICMP error of any kind that quotes a packet (those [`read`]
/// reads, and the deprecated source quench and redirect, which it does not): what a
/// translation must rewrite inside, or refuse.
#[inline(always)]
pub fn is_error(ctx: &TcContext, ip: &Ipv4) -> bool {
    if ip.proto != PROTO_ICMP || u16::from_be(ip.frag) & 0x1fff != 0 {
        return false;
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + l4::L4 + 1 > end {
        return false;
    }
    // SAFETY: inside the packet, checked above.
    let ty = unsafe { load::<u8>(start + l4::L4) };
    matches!(
        ty,
        ICMP_UNREACHABLE
            | ICMP_SOURCE_QUENCH
            | ICMP_REDIRECT
            | ICMP_TIME_EXCEEDED
            | ICMP_PARAMETER_PROBLEM
    )
}

/// The tuple `ip`'s ICMP error quotes; `None` for anything else (another ICMP type, a
/// quote cut short, with options, or of a later fragment).
#[inline(always)]
pub fn read(ctx: &TcContext, ip: &Ipv4) -> Option<Quoted> {
    // A later fragment of anything carries no ICMP header to read.
    if ip.proto != PROTO_ICMP || u16::from_be(ip.frag) & 0x1fff != 0 || !l4::plain_header(ctx) {
        return None;
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + END > end {
        return None;
    }
    // SAFETY: [start, start + END) is inside the packet, checked above.
    let (ty, ver_ihl, frag, proto, saddr, daddr) = unsafe {
        (
            load::<u8>(start + l4::L4),
            load::<u8>(start + INNER),
            load::<u16>(start + INNER + 6),
            load::<u8>(start + INNER + 9),
            load::<u32>(start + INNER + 12),
            load::<u32>(start + INNER + 16),
        )
    };
    if !matches!(
        ty,
        ICMP_UNREACHABLE | ICMP_TIME_EXCEEDED | ICMP_PARAMETER_PROBLEM
    ) || ver_ihl != 0x45
        || u16::from_be(frag) & 0x1fff != 0
    {
        return None;
    }
    // SAFETY: as above, inside [start + INNER_L4, start + END).
    let (sport, dport) = unsafe {
        match proto {
            PROTO_TCP | PROTO_UDP | PROTO_SCTP => (
                load::<u16>(start + INNER_L4),
                load::<u16>(start + INNER_L4 + 2),
            ),
            PROTO_ICMP => match load::<u8>(start + INNER_L4) {
                ICMP_ECHO => (load::<u16>(start + INNER_L4 + 4), 0),
                ICMP_ECHO_REPLY => (0, load::<u16>(start + INNER_L4 + 4)),
                _ => return None,
            },
            _ => (0, 0),
        }
    };
    Some(Quoted {
        saddr,
        daddr,
        sport,
        dport,
        proto,
    })
}
