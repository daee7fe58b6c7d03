//! ICMP errors of a connection (netfilter's "related"): a destination unreachable
//! (fragmentation needed among them), time exceeded or parameter problem quotes the
//! packet it answers. Where that packet's connection has an entry on this side, the
//! error belongs to it and passes as its replies do, whichever rules deny ICMP: path
//! MTU discovery and a refused port keep working through an ingress-deny ACL (L2-20).
//! An error quoting nothing this side holds is judged by the rules as any ICMP.
use aya_ebpf::programs::TcContext;
use juneau_common::ct::{CtKey, PROTO_ICMP, PROTO_SCTP, PROTO_TCP, PROTO_UDP};

use crate::{conntrack, eth::load, ipv4::Ipv4, l4};

const ICMP_UNREACHABLE: u8 = 3;
const ICMP_TIME_EXCEEDED: u8 = 11;
const ICMP_PARAMETER_PROBLEM: u8 = 12;
const ICMP_ECHO: u8 = 8;
const ICMP_ECHO_REPLY: u8 = 0;
/// The quoted IPv4 header, after the error's 8-byte ICMP header.
const INNER: usize = l4::L4 + 8;
/// The quoted transport header (the quoted IPv4 header read only without options).
const INNER_L4: usize = INNER + 20;

/// Whether `ip` (its outer header plain, checked by the caller's `flow`) is an ICMP
/// error quoting a packet of a connection with an entry in `zone`. The quoted packet
/// is one this side's end sent (an error coming back to it) or received (an error it
/// sends about it), so its tuple as quoted is the key of that end's entry.
#[inline(always)]
pub fn related(ctx: &TcContext, ip: &Ipv4, zone: u32) -> bool {
    if ip.proto != PROTO_ICMP {
        return false;
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    // The quoted IPv4 header and the 8 bytes of its transport header RFC 792 keeps.
    if start + INNER_L4 + 8 > end {
        return false;
    }
    // SAFETY: [start, start + INNER_L4 + 8) is inside the packet, checked above.
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
    {
        return false;
    }
    let later_fragment = u16::from_be(frag) & 0x1fff != 0;
    // SAFETY: as above, inside [start + INNER_L4, start + INNER_L4 + 8).
    let (sport, dport) = unsafe {
        match proto {
            _ if later_fragment => return false,
            PROTO_TCP | PROTO_UDP | PROTO_SCTP => (
                load::<u16>(start + INNER_L4),
                load::<u16>(start + INNER_L4 + 2),
            ),
            // As `l4::read` keys an echo: the identifier on the asking side.
            PROTO_ICMP => match load::<u8>(start + INNER_L4) {
                ICMP_ECHO => (load::<u16>(start + INNER_L4 + 4), 0),
                ICMP_ECHO_REPLY => (0, load::<u16>(start + INNER_L4 + 4)),
                _ => return false,
            },
            _ => (0, 0),
        }
    };
    let key = CtKey::new(zone, saddr, daddr, sport, dport, proto);
    conntrack::lookup(&key).is_some()
}
