//! Direct ElasticIPs on the wire, two Nodes on the underlay bridge; the upstream
//! router's frames are injected on the bridge's port of the Node they are sent to.
//! Pod 0 holds 10.99.0.100 on node0 (which advertises it), Pod 1 holds .101 on node1;
//! every capture of each test is compared with `pcaps/<test>/`.
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::{node::dataplane::Holder, standalone::topology::node_mac};
use juneau_common::eip::gateway_mac;
use juneau_harness::{
    capture::inject,
    frames::{self, BROADCAST, fixtures::*, ones_complement},
    node::{Cluster, node_ip},
    scene::Scene,
};

const VNI: u32 = 4097;
const GW: [u8; 4] = [169, 254, 0, 1];
const ROUTER: ([u8; 6], [u8; 4]) = ([0x02, 0, 0, 0x99, 0, 0xfe], [10, 99, 0, 254]);
const CLIENT: [u8; 4] = [198, 51, 100, 10];

const fn eip(i: u8) -> [u8; 4] {
    [10, 99, 0, 100 + i]
}

fn mac(n: usize) -> [u8; 6] {
    juneau::parse_mac(&node_mac(n)).unwrap()
}

fn scene() -> Scene {
    let mut c = Cluster::new(2);
    c.nodes[0].add_eip_pod(0, VNI, eip(0));
    c.nodes[1].add_eip_pod(1, VNI, eip(1));
    let holders: BTreeMap<Ipv4Addr, Holder> = [(0, 0u8), (1, 1)]
        .into_iter()
        .map(|(n, i)| {
            (
                Ipv4Addr::from(eip(i)),
                Holder {
                    mac: pod_mac(i),
                    vni: VNI,
                    node: node_ip(n),
                    pod_ip: None,
                },
            )
        })
        .collect();
    for (n, node) in c.nodes.iter_mut().enumerate() {
        node.dataplane.set_elastic_ips(&holders).unwrap();
        let answers = BTreeMap::from([(Ipv4Addr::from(eip(n as u8)), mac(n))]);
        node.dataplane.set_arp_answers(&answers).unwrap();
    }
    Scene::new(c)
}

/// `frame` from the upstream router to Node `n`.
fn from_router(s: &mut Scene, n: usize, frame: &[u8]) -> juneau_harness::scene::Seen {
    inject(&s.cluster.underlay, &format!("n{n}"), frame);
    s.settle()
}

#[test]
fn eip_08_arp_for_169_254_0_1_is_answered_on_the_nics_own_node() {
    let mut s = scene();
    let seen = s.send(0, 0, &frames::arp_request(pod_mac(0), eip(0), GW));
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![frames::arp_reply(gateway_mac(VNI), GW, pod_mac(0), eip(0))]
    );
    assert!(s.frames(&seen, "underlay-node0").is_empty());
    s.assert_goldens("eip_08_gateway_arp");
}

#[test]
fn eip_11_only_the_advertising_node_answers_arp_for_an_elastic_ip() {
    let mut s = scene();
    let ask = frames::arp_request(ROUTER.0, ROUTER.1, eip(0));
    let seen = from_router(&mut s, 0, &ask);
    assert_eq!(
        s.frames(&seen, "underlay-node0"),
        &vec![frames::arp_reply(mac(0), eip(0), ROUTER.0, ROUTER.1)]
    );
    // The same question to node1, which holds no advertisement for it: silence.
    let seen = from_router(&mut s, 1, &ask);
    assert!(s.frames(&seen, "underlay-node1").is_empty());
    s.assert_goldens("eip_11_arp_only_holder");
}

#[test]
fn eip_01_eip_12_landing_on_a_non_holder_is_carried_with_the_network_id_and_no_nat() {
    let mut s = scene();
    // A stale ARP cache: the client's packet for .100 reaches node1.
    let ping = frames::icmp_echo((ROUTER.0, CLIENT), (mac(1), eip(0)), 63, 56, true);
    let seen = from_router(&mut s, 1, &ping);
    let wire = s.frames(&seen, "underlay-node1");
    assert_eq!(wire.len(), 1, "carried once, to node0");
    assert_eq!(
        &wire[0][30..34],
        &node_ip(0).octets(),
        "to the holder's Node"
    );
    let vni = u32::from_be_bytes([0, wire[0][46], wire[0][47], wire[0][48]]);
    assert_eq!(vni, VNI, "with VNI = networkID");
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1);
    let f = &got[0];
    assert_eq!(
        (&f[0..6], &f[6..12]),
        (&pod_mac(0)[..], &gateway_mac(VNI)[..])
    );
    assert_eq!(
        (&f[26..30], &f[30..34]),
        (&CLIENT[..], &eip(0)[..]),
        "no NAT"
    );
    assert_eq!(f[22], 62, "one hop");
    assert_eq!(ones_complement(&f[14..34]), 0);
    s.assert_goldens("eip_12_carried_to_holder");
}

#[test]
fn eip_16_spoofed_sources_and_non_ipv4_leave_nothing_on_any_wire() {
    let mut s = scene();
    let spoofed = frames::icmp_echo(
        (pod_mac(0), eip(1)),
        (gateway_mac(VNI), CLIENT),
        64,
        8,
        false,
    );
    let ipv6 = frames::ipv6_ns(pod_mac(0), pod_ip6(0), pod_ip6(1));
    let raw = frames::raw(BROADCAST, pod_mac(0), 0x88b5, b"pure l2");
    let before = s.cluster.nodes[0].dataplane.drops().unwrap();
    for f in [&spoofed, &ipv6, &raw] {
        let seen = s.send(0, 0, f);
        assert!(seen.0.iter().all(Vec::is_empty), "something left");
    }
    let after = s.cluster.nodes[0].dataplane.drops().unwrap();
    let moved: Vec<(&str, u64)> = after
        .iter()
        .zip(&before)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, b)| (*a.0, a.1 - b.1))
        .collect();
    assert_eq!(moved, vec![("EIP_NOT_IPV4", 2), ("SOURCE_GUARD", 1)]);
    s.assert_goldens("eip_16_drops");
}

/// ★ After a move the new holder's Node tells the wire at once: three rounds 1.1 s
/// apart, each a broadcast request and a reply about the ElasticIP with its uplink's
/// MAC (the frames `juneau node` sends when it starts answering for an address). The
/// Node that still advertises the address when the announcement arrives (a move not yet
/// synced there) does not answer it: it is not a question.
#[test]
fn eip_11_gratuitous_arp_rounds_after_a_move_are_a_request_and_a_reply_each() {
    let mut s = scene();
    let node = &s.cluster.nodes[1];
    node.ns.run(|| {
        let dev = std::ffi::CString::new(juneau::standalone::topology::UNDERLAY_DEV).unwrap();
        // SAFETY: a C string we own.
        let ifindex = unsafe { libc::if_nametoindex(dev.as_ptr()) };
        assert_ne!(ifindex, 0, "the Node's uplink");
        // .100, which node0 still advertises.
        juneau::features::elasticip::garp::announce(ifindex, mac(1), vec![eip(0).into()], 3);
    });
    std::thread::sleep(std::time::Duration::from_millis(2_800));
    let seen = s.settle();
    let round = juneau::features::elasticip::garp::frames(mac(1), eip(0).into());
    let wire = s.frames(&seen, "underlay-node1");
    assert_eq!(wire.len(), 6, "three rounds of two");
    for pair in wire.chunks(2) {
        assert_eq!(pair, &round[..]);
    }
    assert!(
        s.frames(&seen, "underlay-node0").is_empty(),
        "node0 answered an announcement"
    );
    s.assert_goldens("eip_11_garp_rounds");
}
