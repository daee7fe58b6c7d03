//! The wire NAT-01's and NAT-03's goldens share: two Nodes on the underlay bridge, no
//! gateway Pod. One gateway segment A (10.0.1.0/24): Pods 0 and 2 on node0, Pod 1 on
//! node1; the table routes 0.0.0.0/0 via the NATGateway (or the internet gateway
//! falling back to it), node0 at 10.99.0.110, node1 at .111. Each Node's way out is
//! its own routing table: a default route via the router (10.99.0.254). The upstream
//! router's replies are injected on the bridge's port of the Node they are sent to.
// Each test crate that includes this module uses part of it.
#![allow(dead_code)]
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::{features::router::gateway::RouteSpec, standalone::topology::node_mac};
use juneau_common::gw::ROUTE_NAT_GW;
use juneau_harness::{
    capture::inject,
    frames::{fixtures::*, ones_complement},
    node::{Cluster, PodOptions, UNDERLAY_DEV, node_ip},
    router::{self, Seg},
    scene::{Scene, Seen},
};

pub const VNI_A: u32 = 6201;
pub const GW_A: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x39];
pub const SEG_A: Seg = Seg {
    vni: VNI_A,
    cidr: "10.0.1.0/24",
    gw: [10, 0, 1, 1],
    gw_mac: GW_A,
    mtu: 1450,
};
pub const ON_A: PodOptions = PodOptions::vni(VNI_A).mtu(1450);
pub const ROUTER: ([u8; 6], [u8; 4]) = ([0x02, 0, 0, 0x99, 0, 0xfe], [10, 99, 0, 254]);
pub const CLIENT: [u8; 4] = [198, 51, 100, 10];

/// Node `n`'s address on the NATGateway's ExternalNetwork.
pub const fn nat(n: u8) -> [u8; 4] {
    [10, 99, 0, 110 + n]
}

pub fn mac(n: usize) -> [u8; 6] {
    juneau::parse_mac(&node_mac(n)).unwrap()
}

/// Node `n`'s table: segment A, and the rest by a route of `kind` (via the NATGateway,
/// or the internet gateway falling back to it) at `nat_ip` (0: the Node has no
/// attachment yet).
pub fn router_state(kind: u32, nat_ip: [u8; 4]) -> juneau::features::router::gateway::RouterState {
    let mut want = router::state(
        &[SEG_A],
        &[
            (VNI_A, pod_ip(0), pod_mac(0), node_ip(0)),
            (VNI_A, pod_ip(1), pod_mac(1), node_ip(1)),
            (VNI_A, pod_ip(2), pod_mac(2), node_ip(0)),
        ],
    );
    want.tables.get_mut("t").unwrap().insert(RouteSpec {
        dst: "0.0.0.0/0".parse().unwrap(),
        kind,
        vni: 0,
        gw_ip: Ipv4Addr::UNSPECIFIED,
        gw_mac: [0; 6],
        mtu: 0,
        nh_ip: nat_ip.into(),
    });
    want
}

/// Node `n`'s address answered by ARP (NAT-02's ARPAdvertisement, written as the
/// daemon writes it), and its own way out: a default route via the router, its
/// neighbour known.
pub fn way_out(node: &mut juneau_harness::Node, n: usize) {
    let answers = BTreeMap::from([(Ipv4Addr::from(nat(n as u8)), mac(n))]);
    node.dataplane.set_arp_answers(&answers).unwrap();
    juneau_harness::uplink::default_route_via(
        &node.ns,
        UNDERLAY_DEV,
        Ipv4Addr::from(ROUTER.1),
        ROUTER.0,
    );
}

/// node0 at .110; node1 at .111, or without an address (`node1_addressed` false);
/// 0.0.0.0/0 by a route of `kind`.
pub fn scene_with(kind: u32, node1_addressed: bool) -> Scene {
    let mut c = Cluster::new(2);
    for (n, node) in c.nodes.iter_mut().enumerate() {
        let addr = if n == 1 && !node1_addressed {
            [0; 4]
        } else {
            nat(n as u8)
        };
        node.dataplane
            .sync_router(&router_state(kind, addr))
            .unwrap();
        way_out(node, n);
    }
    c.add_pod(0, 0, ON_A);
    c.add_pod(1, 1, ON_A);
    c.add_pod(0, 2, ON_A);
    Scene::new(c)
}

pub fn scene() -> Scene {
    scene_with(ROUTE_NAT_GW, true)
}

/// `frame` from the upstream router to Node `n`.
pub fn from_router(s: &mut Scene, n: usize, frame: &[u8]) -> Seen {
    inject(&s.cluster.underlay, &format!("n{n}"), frame);
    s.settle()
}

/// `frame` one hop on: TTL - 1, the header's checksum again.
pub fn hopped(mut frame: Vec<u8>) -> Vec<u8> {
    frame[22] -= 1;
    frame[24..26].fill(0);
    let sum = ones_complement(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
    frame
}

/// An ICMP echo reply answering `request` (its identifier, sequence and data), from
/// `src` to `dst` (checksums valid).
pub fn echo_reply(src: ([u8; 6], [u8; 4]), dst: ([u8; 6], [u8; 4]), request: &[u8]) -> Vec<u8> {
    let id = u16::from_be_bytes([request[38], request[39]]);
    let seq = u16::from_be_bytes([request[40], request[41]]);
    let b = etherparse::PacketBuilder::ethernet2(src.0, dst.0)
        .ipv4(src.1, dst.1, 64)
        .icmpv4_echo_reply(id, seq);
    let data = &request[42..];
    let mut f = Vec::with_capacity(b.size(data.len()));
    b.write(&mut f, data).unwrap();
    f
}

pub fn port_of(frame: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([frame[at], frame[at + 1]])
}

/// Pod `i` (node1's pod 0) was told at once that its packet to the client is refused
/// (destination unreachable, administratively prohibited, from its gateway, quoting
/// its packet), never left to time out.
pub fn assert_told_prohibited(s: &Scene, seen: &Seen, i: u8) {
    let told = s.frames(seen, "node1-pod0");
    assert_eq!(told.len(), 1, "one ICMP error back to the sender");
    let f = &told[0];
    assert_eq!(f[23], 1, "ICMP");
    assert_eq!(
        (f[34], f[35]),
        (3, 13),
        "unreachable, administratively prohibited"
    );
    assert_eq!(&f[26..30], &SEG_A.gw, "from the segment's gateway");
    assert_eq!(&f[30..34], &pod_ip(i));
    assert_eq!(
        (&f[54..58], &f[58..62]),
        (&pod_ip(i)[..], &CLIENT[..]),
        "quoting the Pod's packet"
    );
}
