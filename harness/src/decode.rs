//! A layer-by-layer text rendering of a frame: the `.txt` beside each golden pcap, and
//! the unit of the diff printed when a capture differs from its golden.

use juneau::format_mac as mac;

fn ipv4(b: &[u8]) -> String {
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

fn ipv6(b: &[u8]) -> String {
    let a: [u8; 16] = b[..16].try_into().unwrap();
    std::net::Ipv6Addr::from(a).to_string()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const VXLAN_PORT: u16 = 4789;

/// Clears what legitimately varies in an encapsulated frame on the underlay: the outer
/// UDP source port (a hash of the inner flow), the outer IP ID and both checksums.
pub fn normalize_underlay(frame: &mut [u8]) {
    if frame.len() < 14 + 20 + 8 || frame[12..14] != [0x08, 0x00] || frame[14 + 9] != 17 {
        return;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let udp = 14 + ihl;
    if frame.len() < udp + 8 || u16::from_be_bytes([frame[udp + 2], frame[udp + 3]]) != VXLAN_PORT {
        return;
    }
    frame[18..20].fill(0);
    frame[24..26].fill(0);
    frame[udp..udp + 2].fill(0);
    frame[udp + 6..udp + 8].fill(0);
}

/// One line per layer, outermost first.
pub fn layers(frame: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    if frame.len() < 14 {
        out.push(format!("short: {}", hex(frame)));
        return out;
    }
    let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    out.push(format!(
        "eth {} > {} type 0x{ethertype:04x} len {}",
        mac(&frame[6..12]),
        mac(&frame[0..6]),
        frame.len()
    ));
    let mut rest = &frame[14..];
    while (ethertype == 0x8100 || ethertype == 0x88a8) && rest.len() >= 4 {
        let tci = u16::from_be_bytes([rest[0], rest[1]]);
        ethertype = u16::from_be_bytes([rest[2], rest[3]]);
        out.push(format!(
            "vlan id {} pcp {} type 0x{ethertype:04x}",
            tci & 0x0fff,
            tci >> 13
        ));
        rest = &rest[4..];
    }
    match ethertype {
        0x0806 if rest.len() >= 28 => {
            let op = u16::from_be_bytes([rest[6], rest[7]]);
            out.push(format!(
                "arp {} sha {} spa {} tha {} tpa {}",
                match op {
                    1 => "request".to_owned(),
                    2 => "reply".to_owned(),
                    o => format!("op{o}"),
                },
                mac(&rest[8..14]),
                ipv4(&rest[14..18]),
                mac(&rest[18..24]),
                ipv4(&rest[24..28])
            ));
        }
        0x0800 if rest.len() >= 20 => {
            let ihl = usize::from(rest[0] & 0x0f) * 4;
            out.push(format!(
                "ipv4 {} > {} proto {} ttl {} len {}",
                ipv4(&rest[12..16]),
                ipv4(&rest[16..20]),
                rest[9],
                rest[8],
                u16::from_be_bytes([rest[2], rest[3]])
            ));
            if rest[9] == 1 && rest.len() >= ihl + 4 {
                out.push(format!("icmp type {} code {}", rest[ihl], rest[ihl + 1]));
            }
            if rest[9] == 17 && rest.len() >= ihl + 8 {
                let udp = &rest[ihl..];
                let dport = u16::from_be_bytes([udp[2], udp[3]]);
                out.push(format!(
                    "udp {} > {} len {}",
                    u16::from_be_bytes([udp[0], udp[1]]),
                    dport,
                    u16::from_be_bytes([udp[4], udp[5]])
                ));
                if dport == VXLAN_PORT && udp.len() >= 16 {
                    let vni = u32::from_be_bytes([0, udp[12], udp[13], udp[14]]);
                    out.push(format!("vxlan flags 0x{:02x} vni {vni}", udp[8]));
                    for l in layers(&udp[16..]) {
                        if !l.starts_with("bytes") {
                            out.push(format!("inner {l}"));
                        }
                    }
                }
            }
        }
        0x86dd if rest.len() >= 40 => {
            out.push(format!(
                "ipv6 {} > {} nh {} hlim {}",
                ipv6(&rest[8..24]),
                ipv6(&rest[24..40]),
                rest[6],
                rest[7]
            ));
            if rest[6] == 58 && rest.len() >= 44 {
                out.push(format!(
                    "icmpv6 type {} code {} cksum 0x{:04x}",
                    rest[40],
                    rest[41],
                    u16::from_be_bytes([rest[42], rest[43]])
                ));
            }
        }
        0x88cc => out.push(format!("lldp {}", hex(rest))),
        _ => {}
    }
    out.push(format!("bytes {}", hex(frame)));
    out
}

/// The decoded text of a whole capture.
pub fn render(frames: &[Vec<u8>]) -> String {
    let mut s = String::new();
    for (i, f) in frames.iter().enumerate() {
        s.push_str(&format!("frame {i}\n"));
        for l in layers(f) {
            s.push_str(&format!("  {l}\n"));
        }
    }
    if frames.is_empty() {
        s.push_str("(no frames)\n");
    }
    s
}
