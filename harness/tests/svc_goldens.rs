//! ClusterIP Services on the wire, two Nodes on the underlay bridge (SVC-01, SVC-03):
//! every capture of each test is compared with `pcaps/<test>/`. One gateway segment A
//! (10.0.1.0/24); the client is Pod 0 on node0, the backends Pods 1 and 2 on node1.
//! Both Nodes hold the same router and Services, as their daemons write them from the
//! cluster. The reply of a translated connection is routed on the backend's Node and
//! given its ClusterIP back on the client's, where it is delivered.
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::features::services::node::{Frontend, FrontendKey, ServiceState};
use juneau_common::ct::{CT_F_AFFINITY, CT_F_REPLY, PROTO_TCP, PROTO_UDP};
use juneau_harness::{
    frames::{self, fixtures::*, ones_complement},
    node::{Cluster, PodOptions, node_ip},
    router::{self, Seg},
    scene::Scene,
};

const VNI_A: u32 = 6101;
const GW_A: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x17, 0xd5];
const SEG_A: Seg = Seg {
    vni: VNI_A,
    cidr: "10.0.1.0/24",
    gw: [10, 0, 1, 1],
    gw_mac: GW_A,
    mtu: 1450,
};
const DNS: [u8; 4] = [10, 96, 0, 10];
const EMPTY: [u8; 4] = [10, 96, 0, 20];
const STICKY: [u8; 4] = [10, 96, 0, 30];
const ON_A: PodOptions = PodOptions::vni(VNI_A).mtu(1450);

fn services() -> ServiceState {
    let key = |ip: [u8; 4], port, proto| FrontendKey {
        ip: ip.into(),
        port,
        proto,
    };
    let be = |i: u8, port| (Ipv4Addr::from(pod_ip(i)), port);
    ServiceState {
        frontends: BTreeMap::from([
            (
                key(DNS, 53, PROTO_UDP),
                Frontend {
                    backends: vec![be(1, 5353)],
                    affinity_s: None,
                },
            ),
            (key(EMPTY, 80, PROTO_TCP), Frontend::default()),
            (key(EMPTY, 80, PROTO_UDP), Frontend::default()),
            (
                key(STICKY, 80, PROTO_TCP),
                Frontend {
                    backends: vec![be(1, 8080), be(2, 8080)],
                    affinity_s: Some(10_800),
                },
            ),
        ]),
        ..Default::default()
    }
}

/// node0: Pod 0 (the client); node1: Pods 1 and 2 (the backends).
fn scene() -> Scene {
    let mut c = Cluster::new(2);
    let want = router::state(
        &[SEG_A],
        &[
            (VNI_A, pod_ip(0), pod_mac(0), node_ip(0)),
            (VNI_A, pod_ip(1), pod_mac(1), node_ip(1)),
            (VNI_A, pod_ip(2), pod_mac(2), node_ip(1)),
        ],
    );
    for node in &mut c.nodes {
        node.dataplane.sync_router(&want).unwrap();
        node.dataplane.sync_services(&services()).unwrap();
    }
    c.add_pod(0, 0, ON_A);
    c.add_pod(1, 1, ON_A);
    c.add_pod(1, 2, ON_A);
    let mut s = Scene::new(c);
    // Every Pod speaks once, as on a live segment, so that what follows is switched to
    // one port and not flooded: the client's ARP crosses to node1, the backends ask
    // for the gateway (answered where they are).
    s.send(0, 0, &frames::arp_request(pod_mac(0), pod_ip(0), pod_ip(1)));
    s.send(1, 0, &frames::arp_request(pod_mac(1), pod_ip(1), SEG_A.gw));
    s.send(1, 1, &frames::arp_request(pod_mac(2), pod_ip(2), SEG_A.gw));
    s
}

#[test]
fn svc_01_the_first_packet_leaves_translated_and_the_reply_gets_the_cluster_ip_back_on_the_clients_node()
 {
    let mut s = scene();
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 40000), (GW_A, DNS, 53), b"query");
    let seen = s.send(0, 0, &query);
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(got.len(), 1, "delivered to the backend once");
    let f = &got[0];
    assert_eq!(&f[30..34], &pod_ip(1), "to the backend");
    assert_eq!(
        u16::from_be_bytes([f[36], f[37]]),
        5353,
        "at its target port"
    );
    assert_eq!(&f[26..30], &pod_ip(0), "from the client itself");
    assert_eq!(ones_complement(&f[14..34]), 0, "IPv4 checksum");
    assert_eq!(&f[42..], b"query");
    assert!(s.frames(&seen, "node1-pod1").is_empty(), "one backend only");
    // The backend answers its peer on the segment; node0 gives it the ClusterIP back.
    let answer = frames::udp_ports(
        (pod_mac(1), pod_ip(1), 5353),
        (pod_mac(0), pod_ip(0), 40000),
        b"answer",
    );
    let seen = s.send(1, 0, &answer);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0],
        frames::udp_ports(
            (pod_mac(1), DNS, 53),
            (pod_mac(0), pod_ip(0), 40000),
            b"answer"
        ),
        "from the ClusterIP and its port"
    );
    let wire = s.frames(&seen, "underlay-node1");
    assert_eq!(wire.len(), 1, "carried untranslated to the client's Node");
    s.assert_goldens("svc_01_translated_across_nodes");
}

#[test]
fn svc_01_an_icmp_error_from_the_backend_reaches_the_client_quoting_the_cluster_ip() {
    let mut s = scene();
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 40002), (GW_A, DNS, 53), b"query");
    let seen = s.send(0, 0, &query);
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(got.len(), 1, "delivered to the backend once");
    // Nothing listens there: the backend's port unreachable quotes what it received,
    // crosses to node0 as it is, and is given the Service back where it is delivered.
    let refusal = frames::icmp_error(
        (pod_mac(1), pod_ip(1)),
        (pod_mac(0), pod_ip(0)),
        (3, 3, [0; 4]),
        &got[0],
    );
    let seen = s.send(1, 0, &refusal);
    assert_eq!(
        s.frames(&seen, "underlay-node1").len(),
        1,
        "carried as sent"
    );
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1);
    // The query as it was routed (TTL - 1), before its translation.
    let mut routed = query.clone();
    routed[22] -= 1;
    routed[24..26].fill(0);
    let sum = ones_complement(&routed[14..34]);
    routed[24..26].copy_from_slice(&sum.to_be_bytes());
    assert_eq!(
        got[0],
        frames::icmp_error(
            (pod_mac(1), DNS),
            (pod_mac(0), pod_ip(0)),
            (3, 3, [0; 4]),
            &routed
        ),
        "from the ClusterIP, quoting the query as the client sent it, one hop on"
    );
    s.assert_goldens("svc_01_icmp_error_quotes_the_service");
}

#[test]
fn svc_03_a_service_without_endpoints_resets_tcp_and_answers_udp_with_port_unreachable() {
    let mut s = scene();
    // TCP: a reset from the ClusterIP acknowledging the SYN (the socket takes it at
    // once; an ICMP error met while connect holds the socket waits for the
    // retransmission).
    let syn = frames::tcp((pod_mac(0), pod_ip(0), 50000), (GW_A, EMPTY, 80), true, b"");
    let seen = s.send(0, 0, &syn);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1, "the reset, back to the client");
    let f = &got[0];
    assert_eq!(f.len(), 54, "headers only");
    assert_eq!((&f[0..6], &f[6..12]), (&pod_mac(0)[..], &GW_A[..]));
    assert_eq!(f[23], 6, "TCP");
    assert_eq!(
        (&f[26..30], &f[30..34]),
        (&EMPTY[..], &pod_ip(0)[..]),
        "from the ClusterIP"
    );
    assert_eq!(ones_complement(&f[14..34]), 0, "IPv4 checksum");
    assert_eq!(
        (
            u16::from_be_bytes([f[34], f[35]]),
            u16::from_be_bytes([f[36], f[37]])
        ),
        (80, 50000)
    );
    assert_eq!(&f[38..42], &[0; 4], "SEQ 0: the SYN carried no ACK");
    assert_eq!(
        u32::from_be_bytes([f[42], f[43], f[44], f[45]]),
        1001,
        "acknowledges the SYN"
    );
    assert_eq!(f[47], 0x14, "RST|ACK");
    let mut pseudo = f[26..34].to_vec();
    pseudo.extend_from_slice(&[0, 6, 0, 20]);
    pseudo.extend_from_slice(&f[34..54]);
    assert_eq!(ones_complement(&pseudo), 0, "TCP checksum");
    // UDP: ICMP port unreachable from the ClusterIP.
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 50001), (GW_A, EMPTY, 80), b"query");
    let seen2 = s.send(0, 0, &query);
    let got = s.frames(&seen2, "node0-pod0");
    assert_eq!(got.len(), 1);
    let f = &got[0];
    assert_eq!((f[23], f[34], f[35]), (1, 3, 3), "ICMP port unreachable");
    assert_eq!(&f[26..30], &EMPTY, "from the ClusterIP");
    for seen in [&seen, &seen2] {
        for n in 0..2 {
            assert!(
                s.frames(seen, &format!("underlay-node{n}")).is_empty(),
                "nothing crosses the underlay"
            );
        }
    }
    s.assert_goldens("svc_03_reject_without_endpoints");
}

#[test]
fn svc_03_an_affinity_hit_keeps_the_client_on_its_backend() {
    let mut s = scene();
    // The Service has one backend when the client first comes: Pod 1 (node1-pod0).
    let mut one = services();
    let sticky = FrontendKey {
        ip: STICKY.into(),
        port: 80,
        proto: PROTO_TCP,
    };
    one.frontends.get_mut(&sticky).unwrap().backends.truncate(1);
    s.cluster.nodes[0].dataplane.sync_services(&one).unwrap();
    let syn = |sport| {
        frames::tcp(
            (pod_mac(0), pod_ip(0), sport),
            (GW_A, STICKY, 80),
            true,
            b"",
        )
    };
    let seen = s.send(0, 0, &syn(51000));
    assert_eq!(s.frames(&seen, "node1-pod0").len(), 1);
    // A second backend joins; the client's next connections are affinity hits, on its
    // first backend, whatever the Maglev table says.
    s.cluster.nodes[0]
        .dataplane
        .sync_services(&services())
        .unwrap();
    for sport in [51001u16, 51002, 51003] {
        let seen = s.send(0, 0, &syn(sport));
        assert_eq!(s.frames(&seen, "node1-pod0").len(), 1, "port {sport}");
        assert!(s.frames(&seen, "node1-pod1").is_empty(), "port {sport}");
    }
    let hits = s.cluster.nodes[0]
        .dataplane
        .conntrack
        .entries()
        .unwrap()
        .into_iter()
        .filter(|(k, e)| {
            e.flags & CT_F_AFFINITY != 0
                && e.flags & CT_F_REPLY == 0
                && k.daddr == u32::from_ne_bytes(STICKY)
        })
        .count();
    assert_eq!(hits, 3, "three connections chosen by affinity");
    s.assert_goldens("svc_03_affinity_hit");
}

#[test]
fn svc_03_a_port_reused_after_a_closed_service_connection_goes_straight_to_the_backend_and_its_reply_stays_the_backends()
 {
    let mut s = scene();
    // A connection through the ClusterIP from port 52000 (one backend: Pod 1).
    let mut one = services();
    let sticky = FrontendKey {
        ip: STICKY.into(),
        port: 80,
        proto: PROTO_TCP,
    };
    let only = one.frontends.get_mut(&sticky).unwrap();
    only.backends.truncate(1);
    only.affinity_s = None;
    for node in &mut s.cluster.nodes {
        node.dataplane.sync_services(&one).unwrap();
    }
    let me = (pod_mac(0), pod_ip(0), 52000);
    let seen = s.send(0, 0, &frames::tcp(me, (GW_A, STICKY, 80), true, b""));
    assert_eq!(
        s.frames(&seen, "node1-pod0").len(),
        1,
        "through the ClusterIP"
    );
    // The client resets it.
    let seen = s.send(0, 0, &frames::tcp_with_flags(me, (GW_A, STICKY, 80), 0x14));
    assert_eq!(
        s.frames(&seen, "node1-pod0").len(),
        1,
        "the RST reaches the backend"
    );
    // The same port, straight to the backend's address: untranslated both ways.
    let direct = frames::tcp(me, (GW_A, pod_ip(1), 8080), true, b"");
    let seen = s.send(0, 0, &direct);
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(got.len(), 1, "the SYN reaches the backend");
    assert_eq!(&got[0][26..30], &pod_ip(0), "from the client");
    assert_eq!(
        &got[0][30..34],
        &pod_ip(1),
        "to the backend, not another one"
    );
    let syn_ack = frames::tcp_with_flags(
        (pod_mac(1), pod_ip(1), 8080),
        (pod_mac(0), pod_ip(0), 52000),
        0x12,
    );
    let seen = s.send(1, 0, &syn_ack);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1, "the answer reaches the client");
    assert_eq!(
        &got[0][26..30],
        &pod_ip(1),
        "from the backend's own address: the closed Service connection captured nothing"
    );
    assert_eq!(u16::from_be_bytes([got[0][34], got[0][35]]), 8080);
    s.assert_goldens("svc_03_reused_port_goes_direct");
}
