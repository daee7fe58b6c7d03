//! The datapath's own VXLAN encapsulation (known unicast IPv4 between Nodes, see the
//! eBPF `l2::encap` and `l2::decap`): the frames it writes are well-formed VXLAN that
//! the kernel and tshark read, carry the frame unchanged, bypass the VXLAN device, and
//! a TCP stream (GSO packets of up to 64 KB) crosses Nodes byte for byte.
use std::{
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    time::Duration,
};

use etherparse::{Ipv4HeaderSlice, UdpHeaderSlice};
use juneau_harness::{
    Capture,
    frames::{self, BROADCAST, fixtures::*},
    node::{Cluster, PodOptions, VXLAN_DEV, node_ip},
    scene::Scene,
};

const VNI: u32 = 5001;

fn opts() -> PodOptions {
    PodOptions::vni(VNI).mtu(1450)
}

fn vxlan_counter(c: &Cluster, n: usize, counter: &str) -> u64 {
    c.nodes[n].ns.counter(VXLAN_DEV, counter)
}

/// Pods 0 (node0) and 1 (node1) have spoken, so each is known unicast to the other.
fn two_pods() -> Cluster {
    let mut c = Cluster::new(2);
    c.add_pod(0, 0, opts());
    c.add_pod(1, 1, opts());
    c
}

#[test]
fn l2_28_ipv4_unicast_between_nodes_is_encapsulated_by_the_datapath() {
    let mut s = Scene::new(two_pods());
    let raw = Capture::start(&s.cluster.underlay, "n0", "raw");
    s.send(0, 0, &frames::arp_request(pod_mac(0), pod_ip(0), pod_ip(1)));
    s.send(
        1,
        0,
        &frames::arp_reply(pod_mac(1), pod_ip(1), pod_mac(0), pod_ip(0)),
    );
    let _ = raw.received(Duration::from_millis(50));
    let (tx0, rx1) = (
        vxlan_counter(&s.cluster, 0, "tx_packets"),
        vxlan_counter(&s.cluster, 1, "rx_packets"),
    );

    let udp = frames::udp(
        (pod_mac(0), pod_ip(0)),
        (pod_mac(1), pod_ip(1)),
        b"encapsulated by the datapath",
    );
    let seen = s.send(0, 0, &udp);
    assert_eq!(
        s.frames(&seen, "node1-pod0"),
        &vec![udp.clone()],
        "the frame did not arrive unchanged"
    );
    assert_eq!(
        vxlan_counter(&s.cluster, 0, "tx_packets"),
        tx0,
        "node0's VXLAN device sent it: the datapath did not encapsulate"
    );
    assert_eq!(
        vxlan_counter(&s.cluster, 1, "rx_packets"),
        rx1,
        "node1's VXLAN device received it: the datapath did not decapsulate"
    );

    // The wire format, unnormalized: a valid IPv4 header checksum, UDP to 4789 with a
    // zero checksum, the I flag and the VNI, then the frame itself.
    let wire = raw.received(Duration::from_millis(150));
    assert_eq!(
        wire.len(),
        1,
        "one frame on the underlay, got {}",
        wire.len()
    );
    let f = &wire[0];
    assert_eq!(&f[12..14], &[0x08, 0x00]);
    let ip = Ipv4HeaderSlice::from_slice(&f[14..]).expect("outer IPv4 header");
    let h = ip.to_header();
    assert_eq!(
        h.header_checksum,
        h.calc_header_checksum(),
        "outer IPv4 checksum"
    );
    assert_eq!(Ipv4Addr::from(ip.source()), node_ip(0));
    assert_eq!(Ipv4Addr::from(ip.destination()), node_ip(1));
    assert_eq!(ip.ttl(), 64);
    assert_eq!(usize::from(ip.total_len()), f.len() - 14);
    let u = UdpHeaderSlice::from_slice(&f[34..]).expect("outer UDP header");
    assert_eq!(u.destination_port(), 4789);
    assert_eq!(u.checksum(), 0);
    assert_eq!(usize::from(u.length()), f.len() - 34);
    assert!(u.source_port() >= 32768, "source port {}", u.source_port());
    assert_eq!(f[42], 0x08, "VXLAN I flag");
    assert_eq!(u32::from_be_bytes([0, f[46], f[47], f[48]]), VNI);
    assert_eq!(&f[50..], &udp[..], "inner frame");

    // A non-IP frame between the same Pods still goes by the VXLAN device.
    let other = frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"by the device");
    let seen = s.send(0, 0, &other);
    assert_eq!(s.frames(&seen, "node1-pod0"), &vec![other]);
    assert_eq!(vxlan_counter(&s.cluster, 0, "tx_packets"), tx0 + 1);
    assert_eq!(vxlan_counter(&s.cluster, 1, "rx_packets"), rx1 + 1);
    s.assert_goldens("l2_28_ipv4_unicast_encap");
}

#[test]
fn l2_01_a_tagged_ipv4_frame_to_a_known_mac_on_another_node_keeps_its_tag() {
    // The receive path moves an 802.1Q tag into skb metadata before TC sees the frame,
    // so the data shows IPv4; the tag must still cross (by the device, which puts it
    // back inside the VXLAN payload).
    let mut s = Scene::new(two_pods());
    s.send(0, 0, &frames::arp_request(pod_mac(0), pod_ip(0), pod_ip(1)));
    s.send(
        1,
        0,
        &frames::arp_reply(pod_mac(1), pod_ip(1), pod_mac(0), pod_ip(0)),
    );
    let udp = frames::udp((pod_mac(0), pod_ip(0)), (pod_mac(1), pod_ip(1)), b"tagged");
    let mut tagged = udp[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x60, 0x07]);
    tagged.extend_from_slice(&udp[12..]);
    let seen = s.send(0, 0, &tagged);
    assert_eq!(
        s.frames(&seen, "node1-pod0"),
        &vec![tagged.clone()],
        "the tagged frame changed or was lost"
    );
    // On the underlay the tag is inside the VXLAN payload, never on the outer frame.
    let wire = s.frames(&seen, "underlay-node0");
    assert_eq!(wire.len(), 1);
    assert_eq!(&wire[0][12..14], &[0x08, 0x00], "outer frame tagged");
    assert_eq!(&wire[0][50..], &tagged[..], "inner frame");
}

#[test]
fn l2_28_broadcast_and_unknown_ipv4_still_flood_through_the_device() {
    let mut s = Scene::new(two_pods());
    // Nothing learned yet: an IPv4 frame to an unknown MAC is flooded, by the device.
    let unknown = frames::udp((pod_mac(0), pod_ip(0)), (pod_mac(9), pod_ip(9)), b"?");
    let tx0 = vxlan_counter(&s.cluster, 0, "tx_packets");
    let seen = s.send(0, 0, &unknown);
    assert_eq!(s.frames(&seen, "node1-pod0"), &vec![unknown]);
    assert_eq!(vxlan_counter(&s.cluster, 0, "tx_packets"), tx0 + 1);
    let bcast = frames::udp((pod_mac(0), pod_ip(0)), (BROADCAST, [255; 4]), b"all");
    let seen = s.send(0, 0, &bcast);
    assert_eq!(s.frames(&seen, "node1-pod0"), &vec![bcast]);
    assert_eq!(vxlan_counter(&s.cluster, 0, "tx_packets"), tx0 + 2);
}

/// xorshift bytes: the stream the sender writes and the receiver expects.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn l2_28_a_tcp_stream_crosses_nodes_byte_for_byte_through_the_datapath_encapsulation() {
    const LEN: usize = 32 << 20;
    let c = two_pods();
    let (a, b) = (&c.pod(0, 0).ns, &c.pod(1, 0).ns);
    a.ip(&["addr", "add", "10.70.0.1/24", "dev", "eth0"]);
    b.ip(&["addr", "add", "10.70.0.2/24", "dev", "eth0"]);
    let listener = b.run(|| TcpListener::bind("10.70.0.2:5201").expect("listen"));
    let tx0 = vxlan_counter(&c, 0, "tx_packets");
    let ul_tx0 = c.nodes[0].ns.counter("ul0", "tx_packets");
    let received = std::thread::scope(|s| {
        let server = s.spawn(|| {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut got = Vec::with_capacity(LEN);
            conn.read_to_end(&mut got).expect("read");
            got
        });
        a.run(|| {
            let to: SocketAddr = "10.70.0.2:5201".parse().unwrap();
            let mut conn =
                TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect");
            conn.write_all(&pattern(LEN)).expect("write");
        });
        server.join().unwrap()
    });
    assert_eq!(received.len(), LEN, "bytes received");
    assert!(received == pattern(LEN), "the stream arrived altered");
    let by_device = vxlan_counter(&c, 0, "tx_packets") - tx0;
    let by_underlay = c.nodes[0].ns.counter("ul0", "tx_packets") - ul_tx0;
    assert!(
        by_device <= 4,
        "{by_device} packets went by the VXLAN device (ARP only expected)"
    );
    assert!(
        by_underlay > 100,
        "only {by_underlay} packets on the underlay"
    );
}

#[test]
fn l2_28_with_the_datapath_encapsulation_off_ipv4_unicast_goes_by_the_device() {
    let mut c = two_pods();
    for node in &mut c.nodes {
        node.dataplane.detach_underlay().expect("detach underlay");
        node.dataplane.detach_underlay().expect("idempotent");
    }
    let mut s = Scene::new(c);
    s.send(0, 0, &frames::arp_request(pod_mac(0), pod_ip(0), pod_ip(1)));
    s.send(
        1,
        0,
        &frames::arp_reply(pod_mac(1), pod_ip(1), pod_mac(0), pod_ip(0)),
    );
    let tx0 = vxlan_counter(&s.cluster, 0, "tx_packets");
    let udp = frames::udp((pod_mac(0), pod_ip(0)), (pod_mac(1), pod_ip(1)), b"device");
    let seen = s.send(0, 0, &udp);
    assert_eq!(s.frames(&seen, "node1-pod0"), &vec![udp]);
    assert_eq!(vxlan_counter(&s.cluster, 0, "tx_packets"), tx0 + 1);
}
