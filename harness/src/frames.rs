//! Frames the tests inject, built from the fixed addresses of [`fixtures`].
use etherparse::{Icmpv6Type, PacketBuilder};

pub const BROADCAST: [u8; 6] = [0xff; 6];

/// Fixed addresses: every MAC and IP a test uses comes from here, so captures are
/// byte-for-byte reproducible.
pub mod fixtures {
    /// MAC of Pod `i` (locally administered, unicast).
    pub const fn pod_mac(i: u8) -> [u8; 6] {
        [0x02, 0x00, 0x00, 0x00, 0x01, i]
    }
    /// MAC of the host side of Pod `i`'s veth.
    pub const fn host_mac(i: u8) -> [u8; 6] {
        [0x02, 0x00, 0x00, 0x00, 0xfe, i]
    }
    /// A MAC that lives behind Pod `i` (a bridge or nested VM inside it, L2-29).
    pub const fn behind_mac(i: u8, n: u8) -> [u8; 6] {
        [0x02, 0x00, 0x00, 0xbb, i, n]
    }
    pub const fn pod_ip(i: u8) -> [u8; 4] {
        [10, 0, 1, 10 + i]
    }
    pub const fn pod_ip6(i: u8) -> [u8; 16] {
        [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10 + i]
    }
}

fn ether(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    // Pad to the Ethernet minimum so the wire and the capture agree.
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// Any EtherType with an arbitrary payload.
pub fn raw(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    ether(dst, src, ethertype, payload)
}

fn arp(op: u16, dst: [u8; 6], sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut p = Vec::with_capacity(28);
    p.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
    p.extend_from_slice(&op.to_be_bytes());
    p.extend_from_slice(&sha);
    p.extend_from_slice(&spa);
    p.extend_from_slice(&tha);
    p.extend_from_slice(&tpa);
    ether(dst, sha, 0x0806, &p)
}

/// Who has `tpa`? Tell `spa`.
/// An IPv4/UDP frame to the discard port (nobody listens; ICMP replies are rate-limited
/// by the kernel). 18 bytes of payload make a 60-byte frame.
pub fn udp(src: ([u8; 6], [u8; 4]), dst: ([u8; 6], [u8; 4]), payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(src.0, dst.0)
        .ipv4(src.1, dst.1, 64)
        .udp(9, 9);
    let mut f = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut f, payload).unwrap();
    f
}

/// An IPv4/UDP frame between the given ports (checksums valid).
pub fn udp_ports(
    src: ([u8; 6], [u8; 4], u16),
    dst: ([u8; 6], [u8; 4], u16),
    payload: &[u8],
) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(src.0, dst.0)
        .ipv4(src.1, dst.1, 64)
        .udp(src.2, dst.2);
    let mut f = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut f, payload).unwrap();
    f
}

/// An IPv4/TCP segment between the given ports: a SYN (`syn`), else an ACK carrying
/// `payload` (checksums valid).
pub fn tcp(
    src: ([u8; 6], [u8; 4], u16),
    dst: ([u8; 6], [u8; 4], u16),
    syn: bool,
    payload: &[u8],
) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(src.0, dst.0)
        .ipv4(src.1, dst.1, 64)
        .tcp(src.2, dst.2, 1000, 64240);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut f = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut f, payload).unwrap();
    f
}

/// [`tcp`] with the TCP flags byte set to `flags` (RST, FIN, ...), checksum kept valid.
pub fn tcp_with_flags(
    src: ([u8; 6], [u8; 4], u16),
    dst: ([u8; 6], [u8; 4], u16),
    flags: u8,
) -> Vec<u8> {
    let mut f = tcp(src, dst, false, b"");
    f[47] = flags;
    fix_tcp(&mut f);
    f
}

/// The TCP checksum of an IPv4 frame (no IP options) recomputed in place.
pub fn fix_tcp(frame: &mut [u8]) {
    frame[50..52].fill(0);
    let sum = tcp_sum(frame);
    frame[50..52].copy_from_slice(&sum.to_be_bytes());
}

/// The ones' complement sum over the TCP pseudo-header and segment of an IPv4 frame
/// (no IP options): 0 when the checksum is valid.
pub fn tcp_sum(frame: &[u8]) -> u16 {
    let seg = &frame[34..];
    let mut pseudo = Vec::with_capacity(12 + seg.len());
    pseudo.extend_from_slice(&frame[26..34]);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(seg);
    ones_complement(&pseudo)
}

/// An ICMP echo request with `ttl` and `len` bytes of payload; `df` sets Don't
/// Fragment (checksum kept valid).
pub fn icmp_echo(
    src: ([u8; 6], [u8; 4]),
    dst: ([u8; 6], [u8; 4]),
    ttl: u8,
    len: usize,
    df: bool,
) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(src.0, dst.0)
        .ipv4(src.1, dst.1, ttl)
        .icmpv4_echo_request(0x4a4e, 1);
    let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let mut f = Vec::with_capacity(b.size(len));
    b.write(&mut f, &payload).unwrap();
    // etherparse sets DF by default: the flags are ours.
    f[20] = if df { 0x40 } else { 0 };
    f[24..26].fill(0);
    let sum = ones_complement(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

/// An ICMP error (`ty`, `code`; the fourth word: an MTU for fragmentation needed)
/// quoting `quoted`'s IPv4 header and the first 8 bytes after it, as RFC 792 has a
/// router or host quote the packet it answers (checksums valid).
pub fn icmp_error(
    src: ([u8; 6], [u8; 4]),
    dst: ([u8; 6], [u8; 4]),
    (ty, code, word): (u8, u8, [u8; 4]),
    quoted: &[u8],
) -> Vec<u8> {
    let inner = &quoted[14..14 + 28];
    let b = PacketBuilder::ethernet2(src.0, dst.0)
        .ipv4(src.1, dst.1, 64)
        .icmpv4_raw(ty, code, word);
    let mut f = Vec::with_capacity(b.size(inner.len()));
    b.write(&mut f, inner).unwrap();
    f
}

/// `frame` (Ethernet, a 20-byte IPv4 header, then its payload) cut into two IPv4
/// fragments at `at` bytes of the IP payload (a multiple of 8): the first with More
/// Fragments set, the second at offset `at`; the identification is `id`. Headers'
/// checksums valid; padding to the Ethernet minimum as any frame.
pub fn fragments(frame: &[u8], at: usize, id: u16) -> (Vec<u8>, Vec<u8>) {
    assert_eq!(at % 8, 0, "fragment offsets are in 8-byte units");
    let total = u16::from_be_bytes([frame[16], frame[17]]) as usize;
    let payload = &frame[34..14 + total];
    let piece = |bytes: &[u8], offset: usize, more: bool| {
        let mut ip = frame[14..34].to_vec();
        ip[2..4].copy_from_slice(&((20 + bytes.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        let word = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
        ip[6..8].copy_from_slice(&word.to_be_bytes());
        ip[10..12].fill(0);
        let sum = ones_complement(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let mut l3 = ip;
        l3.extend_from_slice(bytes);
        ether(
            frame[0..6].try_into().unwrap(),
            frame[6..12].try_into().unwrap(),
            0x0800,
            &l3,
        )
    };
    (
        piece(&payload[..at], 0, true),
        piece(&payload[at..], at, false),
    )
}

/// The Internet checksum of `bytes` (0 when a header with its checksum is valid).
pub fn ones_complement(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// `inner` as another Node sends it over the overlay: outer Ethernet, IPv4 (`src` ->
/// `dst`), UDP to 4789 with a zero checksum (as the kernel VXLAN device and Juneau send
/// it), the VXLAN header with `vni`.
pub fn vxlan(
    macs: ([u8; 6], [u8; 6]),
    src: [u8; 4],
    dst: [u8; 4],
    vni: u32,
    inner: &[u8],
) -> Vec<u8> {
    let mut payload = vec![0x08, 0, 0, 0];
    payload.extend_from_slice(&(vni << 8).to_be_bytes());
    payload.extend_from_slice(inner);
    let b = PacketBuilder::ethernet2(macs.0, macs.1)
        .ipv4(src, dst, 64)
        .udp(49152, 4789);
    let mut f = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut f, &payload).unwrap();
    f[40..42].fill(0);
    f
}

pub fn arp_request(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
    arp(1, BROADCAST, sha, spa, [0; 6], tpa)
}

/// `spa` is at `sha`, sent to the asker.
pub fn arp_reply(sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    arp(2, tha, sha, spa, tha, tpa)
}

/// An LLDP frame (0x88cc) to the nearest-bridge group address.
pub fn lldp(src: [u8; 6]) -> Vec<u8> {
    // Chassis ID (MAC), Port ID (name "eth0"), TTL 120, End.
    let mut tlv = vec![0x02, 0x07, 0x04];
    tlv.extend_from_slice(&src);
    tlv.extend_from_slice(&[0x04, 0x05, 0x05, b'e', b't', b'h', b'0']);
    tlv.extend_from_slice(&[0x06, 0x02, 0x00, 0x78, 0x00, 0x00]);
    ether([0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e], src, 0x88cc, &tlv)
}

/// An IPv6 neighbour solicitation for `target`, sent to its solicited-node group.
pub fn ipv6_ns(src_mac: [u8; 6], src: [u8; 16], target: [u8; 16]) -> Vec<u8> {
    let mut group = [0u8; 16];
    group[..2].copy_from_slice(&[0xff, 0x02]);
    group[11..].copy_from_slice(&[0x01, 0xff, target[13], target[14], target[15]]);
    let dst_mac = [0x33, 0x33, 0xff, target[13], target[14], target[15]];
    let mut body = target.to_vec();
    body.extend_from_slice(&[1, 1]);
    body.extend_from_slice(&src_mac);
    let builder = PacketBuilder::ethernet2(src_mac, dst_mac)
        .ipv6(src, group, 255)
        .icmpv6(Icmpv6Type::Unknown {
            type_u8: 135,
            code_u8: 0,
            bytes5to8: [0; 4],
        });
    let mut f = Vec::with_capacity(builder.size(body.len()));
    builder.write(&mut f, &body).expect("build NS");
    f
}
