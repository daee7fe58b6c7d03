//! A NATGateway on the wire (NAT-01), on the scene of `nat_scene`: what a Pod sends
//! `via natGateway` leaves its own Node from that Node's address on the
//! ExternalNetwork, and the upstream router's replies (injected on the bridge's port of
//! the Node they are sent to, as in `eip_goldens.rs`) come back to the Pod. Captures of
//! the deterministic tests are compared with `pcaps/<test>/`.
#[path = "../nat_scene/mod.rs"]
mod nat_scene;

use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau_common::{
    ct::{CT_ESTABLISHED, CT_F_NAT, CT_F_REPLY, PROTO_TCP, ZONE_HOST},
    gw::ROUTE_NAT_GW,
};
use juneau_harness::{
    frames::{self, fixtures::*, ones_complement},
    node::{Cluster, PodOptions, UNDERLAY_DEV, node_ip},
    router::{self, Seg},
    scene::Scene,
};
use nat_scene::*;

#[test]
fn nat_01_a_pods_udp_leaves_its_own_node_from_that_nodes_address_and_the_reply_comes_back() {
    let mut s = scene();
    for (n, p, i) in [(0usize, 0usize, 0u8), (1, 0, 1)] {
        let query = frames::udp_ports((pod_mac(i), pod_ip(i), 40000), (GW_A, CLIENT, 53), b"query");
        let seen = s.send(n, p, &query);
        let wire = s.frames(&seen, &format!("underlay-node{n}"));
        assert_eq!(
            wire,
            &vec![hopped(frames::udp_ports(
                (mac(n), nat(n as u8), 40000),
                (ROUTER.0, CLIENT, 53),
                b"query"
            ))],
            "node{n}: out by its own routing table, from its own address, the port kept"
        );
        let other = 1 - n;
        assert!(
            s.frames(&seen, &format!("underlay-node{other}")).is_empty(),
            "no other Node carries it: no gateway Pod"
        );
        let answer = frames::udp_ports(
            (ROUTER.0, CLIENT, 53),
            (mac(n), nat(n as u8), 40000),
            b"answer",
        );
        let seen = from_router(&mut s, n, &answer);
        assert_eq!(
            s.frames(&seen, &format!("node{n}-pod{p}")),
            &vec![hopped(frames::udp_ports(
                (GW_A, CLIENT, 53),
                (pod_mac(i), pod_ip(i), 40000),
                b"answer"
            ))],
            "given its client back, one hop on, from its segment's gateway"
        );
    }
    s.assert_goldens("nat_01_udp_out_and_back");
    // The connection established, its next datagram leaves from the router's first
    // program (nat/fast.rs), byte for byte as the first did.
    let fast = |s: &Scene| {
        s.cluster.nodes[0]
            .dataplane
            .gw_stats()
            .unwrap()
            .into_iter()
            .find(|(n, _)| *n == "NAT_FAST")
            .map_or(0, |(_, v)| v)
    };
    let before = fast(&s);
    let again = frames::udp_ports((pod_mac(0), pod_ip(0), 40000), (GW_A, CLIENT, 53), b"again");
    let seen = s.send(0, 0, &again);
    assert_eq!(
        s.frames(&seen, "underlay-node0"),
        &vec![hopped(frames::udp_ports(
            (mac(0), nat(0), 40000),
            (ROUTER.0, CLIENT, 53),
            b"again"
        ))]
    );
    assert_eq!(fast(&s), before + 1, "sent by the fast path");
}

#[test]
fn nat_01_an_echo_keeps_its_identifier_and_its_reply_comes_back() {
    let mut s = scene();
    let ping = frames::icmp_echo((pod_mac(0), pod_ip(0)), (GW_A, CLIENT), 64, 56, true);
    let seen = s.send(0, 0, &ping);
    let wire = s.frames(&seen, "underlay-node0");
    assert_eq!(wire.len(), 1);
    let out = &wire[0];
    assert_eq!((&out[0..6], &out[6..12]), (&ROUTER.0[..], &mac(0)[..]));
    assert_eq!((&out[26..30], &out[30..34]), (&nat(0)[..], &CLIENT[..]));
    assert_eq!(port_of(out, 38), 0x4a4e, "the identifier kept: free");
    assert_eq!(out[22], 63);
    assert_eq!(ones_complement(&out[14..34]), 0, "IPv4 checksum");
    assert_eq!(ones_complement(&out[34..]), 0, "ICMP checksum");
    let reply = echo_reply((ROUTER.0, CLIENT), (mac(0), nat(0)), out);
    let seen = from_router(&mut s, 0, &reply);
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![hopped(echo_reply(
            (GW_A, CLIENT),
            (pod_mac(0), pod_ip(0)),
            &ping
        ))]
    );
    s.assert_goldens("nat_01_echo_out_and_back");
}

#[test]
fn nat_01_two_pods_with_one_port_to_one_server_get_two_ports_and_each_its_own_replies() {
    let mut s = scene();
    let mut ports = Vec::new();
    for (p, i) in [(0usize, 0u8), (1, 2)] {
        let syn = frames::tcp(
            (pod_mac(i), pod_ip(i), 45000),
            (GW_A, CLIENT, 443),
            true,
            b"",
        );
        let seen = s.send(0, p, &syn);
        let wire = s.frames(&seen, "underlay-node0");
        assert_eq!(wire.len(), 1, "pod {i}'s SYN leaves once");
        let f = &wire[0];
        assert_eq!(&f[26..30], &nat(0));
        assert_eq!(ones_complement(&f[14..34]), 0, "IPv4 checksum");
        ports.push(port_of(f, 34));
    }
    assert_eq!(ports[0], 45000, "the first keeps its own port");
    assert_ne!(ports[1], 45000, "the second gets another");
    assert!(ports[1] >= 1024, "an unprivileged one: {}", ports[1]);
    // Each SYN-ACK reaches the Pod whose connection it answers, at its own port.
    for (p, i, port) in [(1usize, 2u8, ports[1]), (0, 0, ports[0])] {
        let mut synack = frames::tcp((ROUTER.0, CLIENT, 443), (mac(0), nat(0), port), true, b"");
        synack[47] = 0x12;
        frames::fix_tcp(&mut synack);
        let seen = from_router(&mut s, 0, &synack);
        let got = s.frames(&seen, &format!("node0-pod{p}"));
        assert_eq!(got.len(), 1, "pod {i}'s answer, to pod {i} only");
        assert_eq!(&got[0][30..34], &pod_ip(i));
        assert_eq!(port_of(&got[0], 36), 45000, "its own port back");
        assert_eq!(ones_complement(&got[0][14..34]), 0);
        assert_eq!(frames::tcp_sum(&got[0]), 0, "TCP checksum");
        let other = 1 - p;
        assert!(s.frames(&seen, &format!("node0-pod{other}")).is_empty());
    }
    // Both connections are established: the original directions in the segment's zone,
    // their replies in ZONE_HOST; the sweep takes each pair whole once it is over.
    let node = &mut s.cluster.nodes[0];
    let entries = node.dataplane.conntrack.entries().unwrap();
    let originals: Vec<_> = entries
        .iter()
        .filter(|(k, e)| k.zone == VNI_A && e.flags & CT_F_NAT != 0 && e.flags & CT_F_REPLY == 0)
        .collect();
    assert_eq!(originals.len(), 2);
    assert!(originals.iter().all(|(_, e)| e.state == CT_ESTABLISHED));
    let replies = entries
        .iter()
        .filter(|(k, e)| k.zone == ZONE_HOST && e.flags == CT_F_REPLY | CT_F_NAT)
        .count();
    assert_eq!(replies, 2);
    let later = juneau::node::dataplane::monotonic_coarse_ns() + 7 * 3600 * 1_000_000_000;
    let removed = node.dataplane.conntrack.sweep(Some(later)).unwrap();
    assert_eq!(removed, 4, "two pairs");
    assert!(node.dataplane.conntrack.entries().unwrap().is_empty());
    let _ = PROTO_TCP;
}

#[test]
fn nat_01_what_nobody_opened_reaches_no_pod_and_a_node_without_an_address_sends_nothing() {
    let mut s = scene_with(ROUTE_NAT_GW, false);
    // To node0's address at a port no connection holds: not NAT's, to the Node's stack.
    let stray = frames::udp_ports((ROUTER.0, CLIENT, 53), (mac(0), nat(0), 40000), b"stray");
    let seen = from_router(&mut s, 0, &stray);
    for p in 0..2 {
        assert!(s.frames(&seen, &format!("node0-pod{p}")).is_empty());
    }
    // node1 has no attachment yet: its Pod's packet is dropped by name, not routed.
    let before = s.cluster.nodes[1].dataplane.drops().unwrap()["NAT_NO_ADDRESS"];
    let query = frames::udp_ports((pod_mac(1), pod_ip(1), 40000), (GW_A, CLIENT, 53), b"query");
    let seen = s.send(1, 0, &query);
    for n in 0..2 {
        assert!(s.frames(&seen, &format!("underlay-node{n}")).is_empty());
    }
    let after = s.cluster.nodes[1].dataplane.drops().unwrap()["NAT_NO_ADDRESS"];
    assert_eq!(after, before + 1);
    assert_told_prohibited(&s, &seen, 1);
}

#[test]
fn nat_01_an_icmp_error_from_outside_reaches_the_pod_quoting_what_it_sent() {
    let mut s = scene();
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 40003), (GW_A, CLIENT, 53), b"query");
    let seen = s.send(0, 0, &query);
    let wire = s.frames(&seen, "underlay-node0");
    assert_eq!(wire.len(), 1);
    // The server refuses the port: its error quotes the packet as it arrived, from the
    // Node's address.
    let refusal = frames::icmp_error(
        (ROUTER.0, CLIENT),
        (mac(0), nat(0)),
        (3, 3, [0; 4]),
        &wire[0],
    );
    let seen = from_router(&mut s, 0, &refusal);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(
        got,
        &vec![hopped(frames::icmp_error(
            (GW_A, CLIENT),
            (pod_mac(0), pod_ip(0)),
            (3, 3, [0; 4]),
            &hopped(query)
        ))],
        "to the Pod, quoting its own address and port, every checksum right"
    );
    assert!(s.frames(&seen, "node0-pod1").is_empty());
    s.assert_goldens("nat_01_icmp_error_quotes_the_pod");
}

const VNI_B: u32 = 6202;
const GW_B: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x3a];
/// Another Vpc's segment with segment A's very CIDR and gateway address.
const SEG_B: Seg = Seg {
    vni: VNI_B,
    cidr: "10.0.1.0/24",
    gw: [10, 0, 1, 1],
    gw_mac: GW_B,
    mtu: 1450,
};

/// node0 with segment A (Pod 0, 10.0.1.10) and segment B of another Vpc, whose table
/// also routes 0.0.0.0/0 via a NATGateway on the same ExternalNetwork, with Pod 3 at
/// the same 10.0.1.10.
fn overlapping_scene() -> Scene {
    let mut c = Cluster::new(2);
    for (n, node) in c.nodes.iter_mut().enumerate() {
        let mut want = router_state(ROUTE_NAT_GW, nat(n as u8));
        let b = router::state(&[SEG_B], &[(VNI_B, pod_ip(0), pod_mac(3), node_ip(0))]);
        let mut seg = b.segments[&VNI_B].clone();
        seg.table = "tb".into();
        want.segments.insert(VNI_B, seg);
        let mut routes = b.tables["t"].clone();
        routes.insert(
            want.tables["t"]
                .iter()
                .find(|r| r.kind == ROUTE_NAT_GW)
                .cloned()
                .unwrap(),
        );
        want.tables.insert("tb".into(), routes);
        want.neighbours.extend(b.neighbours);
        node.dataplane.sync_router(&want).unwrap();
        way_out(node, n);
    }
    c.add_pod(0, 0, ON_A);
    c.add_pod(0, 3, PodOptions::vni(VNI_B).mtu(1450));
    Scene::new(c)
}

#[test]
fn nat_01_two_vpcs_with_one_cidr_go_out_through_one_node_address_and_each_pod_gets_its_own_replies()
{
    let mut s = overlapping_scene();
    // The same address and port in two Vpcs, to the same server.
    let a = frames::udp_ports(
        (pod_mac(0), pod_ip(0), 40000),
        (GW_A, CLIENT, 53),
        b"from-a",
    );
    let b = frames::udp_ports(
        (pod_mac(3), pod_ip(0), 40000),
        (GW_B, CLIENT, 53),
        b"from-b",
    );
    let mut ports = Vec::new();
    for (p, frame) in [(0usize, &a), (1, &b)] {
        let seen = s.send(0, p, frame);
        let wire = s.frames(&seen, "underlay-node0");
        assert_eq!(wire.len(), 1, "pod {p}'s datagram leaves once");
        assert_eq!(&wire[0][26..30], &nat(0), "from node0's one address");
        ports.push(port_of(&wire[0], 34));
    }
    assert_eq!(ports[0], 40000, "the first keeps its port");
    assert_ne!(ports[1], 40000, "the other Vpc's gets another");
    for (p, gw, port, data) in [
        (1usize, GW_B, ports[1], b"to-b"),
        (0, GW_A, ports[0], b"to-a"),
    ] {
        let answer = frames::udp_ports((ROUTER.0, CLIENT, 53), (mac(0), nat(0), port), data);
        let seen = from_router(&mut s, 0, &answer);
        assert_eq!(
            s.frames(&seen, &format!("node0-pod{p}")),
            &vec![hopped(frames::udp_ports(
                (gw, CLIENT, 53),
                (pod_mac(if p == 0 { 0 } else { 3 }), pod_ip(0), 40000),
                data
            ))],
            "its own Vpc's Pod, from its own segment's gateway"
        );
        assert!(s.frames(&seen, &format!("node0-pod{}", 1 - p)).is_empty());
    }
}

#[test]
fn nat_01_a_first_fragment_opens_the_mapping_and_the_later_one_follows_it() {
    let mut s = scene();
    let big = frames::udp_ports(
        (pod_mac(0), pod_ip(0), 40010),
        (GW_A, CLIENT, 53),
        &[0x5a; 400],
    );
    let (first, later) = frames::fragments(&big, 304, 0x7777);
    // A later fragment before any first opens nothing: refused, not sent.
    let seen = s.send(0, 0, &later);
    assert!(s.frames(&seen, "underlay-node0").is_empty());
    let seen = s.send(0, 0, &first);
    let out = s.frames(&seen, "underlay-node0");
    assert_eq!(out.len(), 1);
    assert_eq!(
        (&out[0][26..30], port_of(&out[0], 34)),
        (&nat(0)[..], 40010)
    );
    assert_eq!(ones_complement(&out[0][14..34]), 0);
    let seen = s.send(0, 0, &later);
    let out = s.frames(&seen, "underlay-node0");
    assert_eq!(out.len(), 1, "the later fragment follows its first");
    assert_eq!(&out[0][26..30], &nat(0), "its source translated too");
    assert_eq!(u16::from_be_bytes([out[0][18], out[0][19]]), 0x7777);
    assert_eq!(ones_complement(&out[0][14..34]), 0);
    assert_eq!(&out[0][34..], &later[34..], "its payload untouched");
}

#[test]
fn nat_01_too_big_for_the_way_out_with_df_is_answered_with_its_mtu() {
    let mut s = scene();
    // node0's way out takes 1,400 bytes; the Pod's segment, 1,450.
    s.cluster.nodes[0]
        .ns
        .ip(&["link", "set", UNDERLAY_DEV, "mtu", "1400"]);
    let mut big = frames::udp_ports(
        (pod_mac(0), pod_ip(0), 40020),
        (GW_A, CLIENT, 53),
        &[0x33; 1392],
    );
    // Don't Fragment, the header's checksum again.
    big[20] |= 0x40;
    big[24..26].fill(0);
    let sum = ones_complement(&big[14..34]);
    big[24..26].copy_from_slice(&sum.to_be_bytes());
    let before = s.cluster.nodes[0].dataplane.drops().unwrap()["FRAG_NEEDED"];
    let seen = s.send(0, 0, &big);
    assert!(
        s.frames(&seen, "underlay-node0").is_empty(),
        "nothing leaves: it does not fit"
    );
    let told = s.frames(&seen, "node0-pod0");
    assert_eq!(told.len(), 1, "fragmentation needed, back to the sender");
    let f = &told[0];
    assert_eq!((f[23], f[34], f[35]), (1, 3, 4));
    assert_eq!(
        u16::from_be_bytes([f[40], f[41]]),
        1400,
        "the way out's MTU"
    );
    assert_eq!(&f[26..30], &SEG_A.gw, "from the segment's gateway");
    assert_eq!(
        (&f[54..58], &f[58..62]),
        (&pod_ip(0)[..], &CLIENT[..]),
        "quoting the Pod's own packet, untranslated"
    );
    let after = s.cluster.nodes[0].dataplane.drops().unwrap()["FRAG_NEEDED"];
    assert_eq!(after, before + 1);
    // Without DF nothing can cut it here, and nothing is translated out: dropped.
    big[20] &= !0x40;
    big[24..26].fill(0);
    let sum = ones_complement(&big[14..34]);
    big[24..26].copy_from_slice(&sum.to_be_bytes());
    let seen = s.send(0, 0, &big);
    assert!(s.frames(&seen, "underlay-node0").is_empty());
}

/// The entry of Pod 0's connection from `sport` to the server (node0, original
/// direction).
fn original(s: &Scene, sport: u16) -> juneau_common::ct::CtEntry {
    s.cluster.nodes[0]
        .dataplane
        .conntrack
        .entries()
        .unwrap()
        .into_iter()
        .find(|(k, e)| k.zone == VNI_A && k.sport == sport.to_be() && e.flags & CT_F_REPLY == 0)
        .map(|(_, e)| e)
        .expect("the connection's original direction")
}

mod changes;
