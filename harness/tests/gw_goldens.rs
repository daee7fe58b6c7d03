//! The router on the wire, two Nodes on the underlay bridge: every capture of each
//! test is compared with `pcaps/<test>/` (the underlay's random outer fields
//! normalized). Segment A (10.0.1.0/24, MTU 1450) has a Pod on each Node, segment B
//! (10.0.2.0/24, MTU 1400) one on node1; every Node holds the same router state, as the
//! daemon writes it from the cluster.
use juneau::features::router::gateway::RouterState;
use juneau_harness::{
    frames::{self, fixtures::*, ones_complement},
    node::{Cluster, PodOptions, node_ip},
    router::{self, Seg},
    scene::Scene,
};

const VNI_A: u32 = 6001;
const VNI_B: u32 = 6002;
const GW_A: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x17, 0x71];
const GW_B: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x17, 0x72];
const GW_A_IP: [u8; 4] = [10, 0, 1, 1];
const GW_B_IP: [u8; 4] = [10, 0, 2, 1];
/// Pod 1 (node1) is on B with this address; Pods 0 (node0) and 2 (node1) are on A
/// with `pod_ip`.
const B_IP: [u8; 4] = [10, 0, 2, 11];

fn state() -> RouterState {
    let a = Seg {
        vni: VNI_A,
        cidr: "10.0.1.0/24",
        gw: GW_A_IP,
        gw_mac: GW_A,
        mtu: 1450,
    };
    let b = Seg {
        vni: VNI_B,
        cidr: "10.0.2.0/24",
        gw: GW_B_IP,
        gw_mac: GW_B,
        mtu: 1400,
    };
    router::state(
        &[a, b],
        &[
            (VNI_A, pod_ip(0), pod_mac(0), node_ip(0)),
            (VNI_B, B_IP, pod_mac(1), node_ip(1)),
            (VNI_A, pod_ip(2), pod_mac(2), node_ip(1)),
        ],
    )
}

const ON_A: PodOptions = PodOptions::vni(VNI_A).mtu(1450);
const ON_B: PodOptions = PodOptions::vni(VNI_B).mtu(1400);

/// Two Nodes with the router state, and `pods` as (Node, Pod index, segment).
fn scene_with(pods: &[(usize, u8, PodOptions)]) -> Scene {
    let mut c = Cluster::new(2);
    let want = state();
    for node in &mut c.nodes {
        node.dataplane.sync_router(&want).unwrap();
    }
    for &(n, i, opts) in pods {
        c.add_pod(n, i, opts);
    }
    Scene::new(c)
}

/// Pod 0 on A (node0), Pod 1 on B and Pod 2 on A (node1).
fn scene() -> Scene {
    scene_with(&[(0, 0, ON_A), (1, 1, ON_B), (1, 2, ON_A)])
}

#[test]
fn l2_13_gateway_arp_is_answered_on_every_node_with_the_same_mac() {
    let mut s = scene();
    let seen = s.send(0, 0, &frames::arp_request(pod_mac(0), pod_ip(0), GW_A_IP));
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![frames::arp_reply(GW_A, GW_A_IP, pod_mac(0), pod_ip(0))]
    );
    let seen2 = s.send(1, 1, &frames::arp_request(pod_mac(2), pod_ip(2), GW_A_IP));
    assert_eq!(
        s.frames(&seen2, "node1-pod1"),
        &vec![frames::arp_reply(GW_A, GW_A_IP, pod_mac(2), pod_ip(2))]
    );
    for seen in [&seen, &seen2] {
        for n in 0..2 {
            assert!(
                s.frames(seen, &format!("underlay-node{n}")).is_empty(),
                "a request for the gateway never crosses the underlay"
            );
        }
    }
    s.assert_goldens("l2_13_gateway_arp_every_node");
}

#[test]
fn l2_15_routed_across_nodes_with_the_destination_vni_and_one_ttl_decrement() {
    let mut s = scene();
    // Pod 1 on B never spoke: node0 has no port of B, its seed says node1, and node1
    // hands it to B's ports (L2-18: reached at the first packet).
    let ping = frames::icmp_echo((pod_mac(0), pod_ip(0)), (GW_A, B_IP), 64, 56, true);
    let seen = s.send(0, 0, &ping);
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(got.len(), 1, "delivered once");
    let f = &got[0];
    assert_eq!((&f[0..6], &f[6..12]), (&pod_mac(1)[..], &GW_B[..]));
    assert_eq!(f[22], 63);
    assert_eq!(ones_complement(&f[14..34]), 0);
    assert_eq!(&f[34..], &ping[34..]);
    let wire = s.frames(&seen, "underlay-node0");
    assert_eq!(wire.len(), 1, "one unicast frame to node1, no flood");
    let vni = u32::from_be_bytes([0, wire[0][46], wire[0][47], wire[0][48]]);
    assert_eq!(vni, VNI_B, "carried with the destination segment's VNI");
    // And back: B's Pod to A's Pod on node0.
    let pong = frames::icmp_echo((pod_mac(1), B_IP), (GW_B, pod_ip(0)), 64, 56, true);
    let seen = s.send(1, 0, &pong);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1);
    assert_eq!((&got[0][6..12], got[0][22]), (&GW_A[..], 63));
    s.assert_goldens("l2_15_routed_cross_node");
}

#[test]
fn gw_time_exceeded_and_fragmentation_needed_come_from_the_gateway() {
    let mut s = scene();
    let expiring = frames::icmp_echo((pod_mac(0), pod_ip(0)), (GW_A, B_IP), 1, 56, true);
    let seen = s.send(0, 0, &expiring);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1);
    assert_eq!((got[0][34], &got[0][26..30]), (11, &GW_A_IP[..]));
    // 1428 bytes of IPv4 fit A (1450) but not B (1400).
    let big = frames::icmp_echo((pod_mac(0), pod_ip(0)), (GW_A, B_IP), 64, 1400, true);
    let seen = s.send(0, 0, &big);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1);
    assert_eq!((got[0][34], got[0][35]), (3, 4));
    assert_eq!(u16::from_be_bytes([got[0][40], got[0][41]]), 1400);
    assert!(s.frames(&seen, "node1-pod0").is_empty(), "not forwarded");
    s.assert_goldens("gw_icmp_errors");
}

#[test]
fn l2_18_a_host_heard_once_is_reached_from_another_node() {
    // node0: Pod 0 on B (the sender) and Pod 2 on A (so node0 hears A's broadcasts);
    // node1: Pod 1 on A with a VM behind it that Juneau never addressed.
    let mut s = scene_with(&[(0, 0, ON_B), (1, 1, ON_A), (0, 2, ON_A)]);
    let (vm_mac, vm_ip) = (behind_mac(1, 1), [10, 0, 1, 200]);
    let ping = frames::icmp_echo((pod_mac(0), [10, 0, 2, 10]), (GW_B, vm_ip), 64, 56, true);
    let seen = s.send(0, 0, &ping);
    let back = s.frames(&seen, "node0-pod0");
    assert_eq!(back.len(), 1);
    assert_eq!(
        (back[0][34], back[0][35]),
        (3, 1),
        "host unreachable at first"
    );
    // The VM asks for a neighbour on the segment: the broadcast crosses the overlay,
    // and every Node with a port of A learns where the VM is.
    let seen = s.send(1, 0, &frames::arp_request(vm_mac, vm_ip, pod_ip(2)));
    assert_eq!(
        s.frames(&seen, "node0-pod1").len(),
        1,
        "the request reached node0"
    );
    let seen = s.send(0, 0, &ping);
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(got.len(), 1, "routed to the VM's Node");
    assert_eq!(
        (&got[0][0..6], &got[0][6..12], got[0][22]),
        (&vm_mac[..], &GW_A[..], 63)
    );
    let wire = s.frames(&seen, "underlay-node0");
    assert_eq!(wire.len(), 1, "one unicast frame, no flood");
    s.assert_goldens("l2_18_learned_host_across_nodes");
}
