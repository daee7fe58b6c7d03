//! The ports of the transport header after a 20-byte IPv4 header: what the connection
//! table and the Services key by. TCP, UDP and SCTP carry their ports in the header's
//! first four bytes; an ICMP echo's identifier stands in for the source port. A
//! later fragment carries no header, and a header with options is not read: neither
//! has ports here (`None`), and they are never translated.
use aya_ebpf::programs::TcContext;
use juneau_common::ct::{PROTO_ICMP, PROTO_SCTP, PROTO_TCP, PROTO_UDP};

use crate::{
    eth::load,
    ipv4::{IP_END, Ipv4},
};

/// Offset of the transport header in the frame.
pub const L4: usize = IP_END;
/// Offset of the TCP checksum.
pub const TCP_CSUM: usize = L4 + 16;
/// Offset of the UDP checksum.
pub const UDP_CSUM: usize = L4 + 6;

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_ACK: u8 = 0x10;

const ICMP_ECHO: u8 = 8;
const ICMP_ECHO_REPLY: u8 = 0;

/// Whether the IPv4 header is the plain 20 bytes this datapath reads (no options).
#[inline(always)]
pub fn plain_header(ctx: &TcContext) -> bool {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + L4 > end {
        return false;
    }
    // SAFETY: [start, start + L4) is inside the packet, checked above.
    (unsafe { load::<u8>(start + crate::eth::ETH_HLEN) } & 0xf) == 5
}

/// Ports as the packet carries them (network order), and TCP's flags.
#[derive(Clone, Copy, Default)]
pub struct Ports {
    pub sport: u16,
    pub dport: u16,
    pub tcp_flags: u8,
}

#[inline(always)]
pub fn read(ctx: &TcContext, ip: &Ipv4) -> Option<Ports> {
    let (start, end) = (ctx.data(), ctx.data_end());
    // A later fragment (offset != 0) has no transport header.
    if u16::from_be(ip.frag) & 0x1fff != 0 || start + L4 + 8 > end {
        return None;
    }
    // SAFETY: [start, start + L4 + 8) is inside the packet, checked above.
    let ihl = unsafe { load::<u8>(start + crate::eth::ETH_HLEN) } & 0xf;
    if ihl != 5 {
        return None;
    }
    match ip.proto {
        PROTO_UDP | PROTO_SCTP => Some(Ports {
            // SAFETY: as above.
            sport: unsafe { load::<u16>(start + L4) },
            dport: unsafe { load::<u16>(start + L4 + 2) },
            tcp_flags: 0,
        }),
        PROTO_TCP => {
            if start + L4 + 20 > end {
                return None;
            }
            // SAFETY: [start, start + L4 + 20) checked just above.
            Some(unsafe {
                Ports {
                    sport: load::<u16>(start + L4),
                    dport: load::<u16>(start + L4 + 2),
                    tcp_flags: load::<u8>(start + L4 + 13),
                }
            })
        }
        PROTO_ICMP => {
            // SAFETY: as above.
            let (ty, id) = unsafe { (load::<u8>(start + L4), load::<u16>(start + L4 + 4)) };
            match ty {
                ICMP_ECHO => Some(Ports {
                    sport: id,
                    dport: 0,
                    tcp_flags: 0,
                }),
                ICMP_ECHO_REPLY => Some(Ports {
                    sport: 0,
                    dport: id,
                    tcp_flags: 0,
                }),
                _ => None,
            }
        }
        _ => None,
    }
}
