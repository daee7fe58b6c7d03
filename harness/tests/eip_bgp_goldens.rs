//! Direct ElasticIPs of a bgp pool on the wire (EIP-12, EIP-14): two Nodes on the
//! underlay bridge, the pool 203.0.113.0/24 announced by both, 203.0.113.128/25 pinned
//! by `nodeName` to node1 (`DELIVERED_ELSEWHERE` on node0). Pod 0 holds .10 on node0;
//! Pods 1 and 2 hold .11 and .130 on node1. Each Node's way out is a default route via
//! the upstream router (10.99.0.254, its MAC known), forwarding on; the router's frames
//! are injected on the bridge's port of the Node they are sent to. Every capture is
//! compared with `pcaps/<test>/`.
use std::{collections::BTreeMap, net::Ipv4Addr};

use ipnet::Ipv4Net;
use juneau::{
    node::dataplane::{Delivery, Holder},
    standalone::topology::node_mac,
};
use juneau_common::eip::gateway_mac;
use juneau_harness::{
    capture::inject,
    frames::{self, fixtures::*},
    node::{Cluster, UNDERLAY_DEV, node_ip},
    scene::{Scene, Seen},
};

const VNI: u32 = 4098;
const ROUTER: ([u8; 6], [u8; 4]) = ([0x02, 0, 0, 0x99, 0, 0xfe], [10, 99, 0, 254]);
const CLIENT: [u8; 4] = [198, 51, 100, 10];
const A: [u8; 4] = [203, 0, 113, 10];
const B: [u8; 4] = [203, 0, 113, 11];
const PINNED: [u8; 4] = [203, 0, 113, 130];

fn mac(n: usize) -> [u8; 6] {
    juneau::parse_mac(&node_mac(n)).unwrap()
}

fn net(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

/// How Node `n` delivers the announced prefixes (what `desired::delivery` gives for
/// `wan-all` and `wan-b` pinned to node1).
fn pools(n: usize) -> BTreeMap<Ipv4Net, Delivery> {
    let pinned = if n == 1 {
        Delivery::Here
    } else {
        Delivery::Elsewhere
    };
    BTreeMap::from([
        (net("203.0.113.0/24"), Delivery::Here),
        (net("203.0.113.128/25"), pinned),
    ])
}

fn scene() -> Scene {
    let mut c = Cluster::new(2);
    c.nodes[0].add_eip_pod(0, VNI, A);
    c.nodes[1].add_eip_pod(1, VNI, B);
    c.nodes[1].add_eip_pod(2, VNI, PINNED);
    let holders: BTreeMap<Ipv4Addr, Holder> = [(A, 0u8, 0usize), (B, 1, 1), (PINNED, 2, 1)]
        .into_iter()
        .map(|(ip, i, n)| {
            let h = Holder {
                mac: pod_mac(i),
                vni: VNI,
                node: node_ip(n),
                pod_ip: None,
            };
            (Ipv4Addr::from(ip), h)
        })
        .collect();
    for (n, node) in c.nodes.iter_mut().enumerate() {
        node.dataplane.set_elastic_ips(&holders).unwrap();
        node.dataplane.set_ext_pools(&pools(n)).unwrap();
        assert_eq!(node.dataplane.pools.read().unwrap(), pools(n), "read back");
        juneau_harness::uplink::default_route_via(
            &node.ns,
            UNDERLAY_DEV,
            Ipv4Addr::from(ROUTER.1),
            ROUTER.0,
        );
        node.ns.sysctl("net.ipv4.ip_forward", "1");
    }
    Scene::new(c)
}

/// `frame` from the upstream router to Node `n`.
fn from_router(s: &mut Scene, n: usize, frame: &[u8]) -> Seen {
    inject(&s.cluster.underlay, &format!("n{n}"), frame);
    s.settle()
}

fn nothing_in_pods(s: &Scene, seen: &Seen) -> bool {
    s.pod_counts(seen).iter().all(|(_, n)| *n == 0)
}

/// EIP-14: .130 is held on node1 and pinned there; node0 knows its holder (every Node
/// holds every direct ElasticIP) but does not turn the packet around: it leaves by
/// node0's routing table for the upstream, one hop taken, addresses as sent. .11 is in
/// the pool both announce: turned around, carried to node1 over VXLAN as before.
#[test]
fn eip_14_a_range_pinned_to_another_node_leaves_for_the_upstream_inside_a_pool_all_announce() {
    let mut s = scene();
    let to_pinned = frames::icmp_echo((pod_mac(0), A), (gateway_mac(VNI), PINNED), 64, 56, true);
    let seen = s.send(0, 0, &to_pinned);
    assert_eq!(
        s.frames(&seen, "underlay-node0"),
        &vec![frames::icmp_echo(
            (mac(0), A),
            (ROUTER.0, PINNED),
            63,
            56,
            true
        )],
        "to the upstream router, not to node1"
    );
    assert!(nothing_in_pods(&s, &seen), "{:?}", s.pod_counts(&seen));
    assert!(s.frames(&seen, "underlay-node1").is_empty());

    let to_b = frames::icmp_echo((pod_mac(0), A), (gateway_mac(VNI), B), 64, 56, true);
    let seen = s.send(0, 0, &to_b);
    let wire = s.frames(&seen, "underlay-node0");
    assert_eq!(wire.len(), 1, "carried once");
    assert_eq!(
        &wire[0][30..34],
        &node_ip(1).octets(),
        "to node1 over VXLAN"
    );
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(got.len(), 1, "turned around to .11's holder");
    assert_eq!((&got[0][26..30], &got[0][30..34]), (&A[..], &B[..]));
    s.assert_goldens("eip_14_delivered_elsewhere");
}

/// EIP-12: an address of the announced pool that no NIC holds is dropped at the
/// uplink (`EXT_POOL_NO_HOLDER`); before, node0's stack routed it back to the
/// upstream, which sent it here again until its TTL ran out. An address outside every
/// pool still goes to the stack, which forwards it back out (what the capture would
/// have shown for the pool's address).
#[test]
fn eip_12_an_unheld_address_of_an_announced_pool_is_dropped_not_routed_back() {
    let mut s = scene();
    let before = s.cluster.nodes[0].dropped();
    let unheld = frames::icmp_echo(
        (ROUTER.0, CLIENT),
        (mac(0), [203, 0, 113, 50]),
        63,
        8,
        false,
    );
    let seen = from_router(&mut s, 0, &unheld);
    assert!(seen.0.iter().all(Vec::is_empty), "something left");
    let after = s.cluster.nodes[0].dropped();
    assert_eq!(
        after.get("EXT_POOL_NO_HOLDER").copied().unwrap_or(0)
            - before.get("EXT_POOL_NO_HOLDER").copied().unwrap_or(0),
        1,
        "{after:?}"
    );
    let outside = frames::icmp_echo((ROUTER.0, CLIENT), (mac(0), [198, 18, 0, 1]), 63, 8, false);
    let seen = from_router(&mut s, 0, &outside);
    assert_eq!(
        s.frames(&seen, "underlay-node0"),
        &vec![frames::icmp_echo(
            (mac(0), CLIENT),
            (ROUTER.0, [198, 18, 0, 1]),
            62,
            8,
            false
        )],
        "outside every pool: the stack's, forwarded back out"
    );
    s.assert_goldens("eip_12_an_unheld_address_is_dropped");
}
