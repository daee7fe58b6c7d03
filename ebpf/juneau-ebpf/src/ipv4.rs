//! The IPv4 header: read with the checks every IPv4 path needs (version, header
//! length, total length within the frame), one hop taken off it, and the incremental
//! checksum update both need. Shared by the router and the ElasticIP programs.
use aya_ebpf::programs::TcContext;
use juneau_common::DropReason;

use crate::eth::{ETH_HLEN, load, store};

/// Ethernet + a 20-byte IPv4 header (options are not read).
pub const IP_END: usize = ETH_HLEN + 20;

/// What the datapath reads of an IPv4 header.
pub struct Ipv4 {
    pub saddr: u32,
    pub daddr: u32,
    pub ttl: u8,
    pub proto: u8,
    pub tot_len: u32,
    /// Fragment word, raw.
    pub frag: u16,
    /// Identification, raw (what ties a datagram's fragments together).
    pub id: u16,
}

/// Addresses no router forwards from or to: 0/8, loopback, multicast and the limited
/// broadcast (first octet 0, 127, or 224 and above). Network order in memory: the
/// first octet is the low byte.
#[inline(always)]
pub fn martian(addr: u32) -> bool {
    let first = addr as u8;
    first == 0 || first == 127 || first >= 224
}

#[inline(always)]
pub fn read(ctx: &TcContext) -> Result<Ipv4, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + IP_END > end {
        return Err(DropReason::BadIpHeader);
    }
    // SAFETY: inside [start, start + IP_END), checked above.
    let (ver_ihl, tot_len, id, frag, ttl, proto, saddr, daddr) = unsafe {
        (
            load::<u8>(start + ETH_HLEN),
            u16::from_be(load::<u16>(start + ETH_HLEN + 2)) as u32,
            load::<u16>(start + ETH_HLEN + 4),
            load::<u16>(start + ETH_HLEN + 6),
            load::<u8>(start + ETH_HLEN + 8),
            load::<u8>(start + ETH_HLEN + 9),
            load::<u32>(start + ETH_HLEN + 12),
            load::<u32>(start + ETH_HLEN + 16),
        )
    };
    if ver_ihl >> 4 != 4
        || ver_ihl & 0xf < 5
        || tot_len < 20
        || tot_len > ctx.len() - ETH_HLEN as u32
    {
        return Err(DropReason::BadIpHeader);
    }
    Ok(Ipv4 {
        saddr,
        daddr,
        ttl,
        proto,
        tot_len,
        frag,
        id,
    })
}

/// RFC 1624 incremental update of a 16-bit ones' complement checksum for one 16-bit
/// word changing from `old` to `new`. The words may be in either byte order, as long
/// as all three are in the same one (ones' complement sums commute with byte swaps).
#[inline(always)]
pub fn csum_replace(csum: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!csum) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// A 32-bit word's change applied to a 16-bit ones' complement checksum, as its two
/// halves (raw, in memory order, as the checksum is loaded).
#[inline(always)]
pub fn csum_replace32(csum: u16, old: u32, new: u32) -> u16 {
    let csum = csum_replace(csum, old as u16, new as u16);
    csum_replace(csum, (old >> 16) as u16, (new >> 16) as u16)
}

/// TTL - 1 of the IPv4 header after the Ethernet one at `start`, its checksum updated
/// incrementally.
///
/// # Safety
/// `[start, start + ETH_HLEN + 20)` must be inside the packet, and the TTL above 1.
#[inline(always)]
pub unsafe fn decrement_ttl(start: usize) {
    // SAFETY: the caller's bounds.
    unsafe {
        let word = load::<u16>(start + ETH_HLEN + 8);
        // The TTL is the first byte of the word in memory (its low byte here); it is
        // above 1, so no borrow reaches the protocol byte.
        let new = word - 1;
        let csum = load::<u16>(start + ETH_HLEN + 10);
        store::<u16>(start + ETH_HLEN + 8, new);
        store::<u16>(start + ETH_HLEN + 10, csum_replace(csum, word, new));
    }
}
