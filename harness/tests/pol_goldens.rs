//! NetworkACL on the wire, two Nodes on the underlay bridge (POL-01, L2-20, L2-31):
//! every capture of each test is compared with `pcaps/<test>/`. Gateway segment A
//! (10.0.1.0/24): Pod 0 on node0, Pod 1 on node1; gateway segment B (10.0.2.0/24): Pod 2
//! on node1. A's NetworkACL lets nothing in (`ingress: []`) and denies TCP 23 out
//! before it allows everything else. Both Nodes hold the same router and rule sets, as
//! their daemons write them from the cluster.
use juneau::{
    api::networkacl::AclRule,
    features::policy::node::{Compiled, PolicyState, compile},
};
use juneau_common::policy::SET_ACL;
use juneau_harness::{
    frames::{self, fixtures::*},
    node::{Cluster, PodOptions, node_ip},
    router::{self, Seg},
    scene::Scene,
};
use serde_json::json;

const VNI_A: u32 = 6201;
const VNI_B: u32 = 6202;
const GW_A: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x39];
const GW_B: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x3a];
const SEG_A: Seg = Seg {
    vni: VNI_A,
    cidr: "10.0.1.0/24",
    gw: [10, 0, 1, 1],
    gw_mac: GW_A,
    mtu: 1450,
};
const SEG_B: Seg = Seg {
    vni: VNI_B,
    cidr: "10.0.2.0/24",
    gw: [10, 0, 2, 1],
    gw_mac: GW_B,
    mtu: 1450,
};
const ACL: u32 = 9;
const B2: [u8; 4] = [10, 0, 2, 12];

fn acl() -> Compiled {
    let egress: Vec<AclRule> = serde_json::from_value(json!([
        {"priority": 10, "action": "deny", "protocol": "tcp", "ports": [{"port": 23}]},
        {"priority": 20, "action": "allow"},
    ]))
    .unwrap();
    Compiled {
        kind: SET_ACL,
        version: 1,
        dirs: [
            compile::acl_direction(Some(&[])).0,
            compile::acl_direction(Some(&egress)).0,
        ],
    }
}

fn scene() -> Scene {
    let mut c = Cluster::new(2);
    let mut want = router::state(
        &[SEG_A, SEG_B],
        &[
            (VNI_A, pod_ip(0), pod_mac(0), node_ip(0)),
            (VNI_A, pod_ip(1), pod_mac(1), node_ip(1)),
            (VNI_B, B2, pod_mac(2), node_ip(1)),
        ],
    );
    want.segments.get_mut(&VNI_A).unwrap().acl = ACL;
    let rules = PolicyState {
        sets: [(ACL, acl())].into(),
        nics: Default::default(),
    };
    for node in &mut c.nodes {
        node.dataplane.policy.sync(&rules).unwrap();
        node.dataplane.sync_router(&want).unwrap();
    }
    c.add_pod(0, 0, PodOptions::vni(VNI_A).mtu(1450));
    c.add_pod(1, 1, PodOptions::vni(VNI_A).mtu(1450));
    c.add_pod(1, 2, PodOptions::vni(VNI_B).mtu(1450));
    let mut s = Scene::new(c);
    // Every Pod speaks once, as on a live segment (so what follows is switched to one
    // port, not flooded).
    s.send(0, 0, &frames::arp_request(pod_mac(0), pod_ip(0), pod_ip(1)));
    s.send(1, 0, &frames::arp_request(pod_mac(1), pod_ip(1), SEG_A.gw));
    s.send(1, 1, &frames::arp_request(pod_mac(2), B2, SEG_B.gw));
    s
}

#[test]
fn pol_01_a_denied_syn_never_leaves_its_node() {
    let mut s = scene();
    let syn = frames::tcp((pod_mac(0), pod_ip(0), 40000), (GW_A, B2, 23), true, b"");
    let seen = s.send(0, 0, &syn);
    for name in ["underlay-node0", "underlay-node1", "node1-pod1"] {
        assert!(s.frames(&seen, name).is_empty(), "{name}: nothing");
    }
    let drops = s.cluster.nodes[0].dataplane.drops().unwrap();
    assert_eq!(
        drops
            .iter()
            .find(|(n, _)| **n == "POLICY_ACL_EGRESS")
            .map(|(_, c)| *c),
        Some(1),
        "{drops:?}"
    );
    s.assert_goldens("pol_01_denied_syn");
}

#[test]
fn l2_20_the_reply_of_an_allowed_connection_crosses_an_ingress_deny_acl() {
    let mut s = scene();
    let syn = frames::tcp((pod_mac(0), pod_ip(0), 40001), (GW_A, B2, 80), true, b"");
    let seen = s.send(0, 0, &syn);
    assert_eq!(s.frames(&seen, "node1-pod1").len(), 1, "the SYN reaches B");
    // The answer, routed on node1 into A and carried to node0: a reply, so A's
    // ingress `[]` lets it in.
    let answer = frames::tcp((pod_mac(2), B2, 80), (GW_B, pod_ip(0), 40001), false, b"");
    let seen = s.send(1, 1, &answer);
    assert_eq!(
        s.frames(&seen, "node0-pod0").len(),
        1,
        "the reply reaches A"
    );
    // A connection B opens is not a reply: A's ingress denies it where it is delivered.
    let open = frames::tcp((pod_mac(2), B2, 5000), (GW_B, pod_ip(0), 22), true, b"");
    let seen = s.send(1, 1, &open);
    assert!(s.frames(&seen, "node0-pod0").is_empty(), "denied at node0");
    s.assert_goldens("l2_20_reply_across_ingress_deny");
}

#[test]
fn l2_20_an_icmp_error_of_an_allowed_connection_crosses_an_ingress_deny_acl() {
    let mut s = scene();
    let syn = frames::tcp((pod_mac(0), pod_ip(0), 40002), (GW_A, B2, 80), true, b"");
    let seen = s.send(0, 0, &syn);
    assert_eq!(s.frames(&seen, "node1-pod1").len(), 1, "the SYN reaches B");
    // B answers with fragmentation needed (MTU 1400) for what A sent: routed on node1,
    // carried to node0, and delivered across A's ingress `[]` as part of the connection.
    let frag_needed = |quoted: &[u8]| {
        frames::icmp_error(
            (pod_mac(2), B2),
            (GW_B, pod_ip(0)),
            (3, 4, [0, 0, 5, 0x78]),
            quoted,
        )
    };
    let seen = s.send(1, 1, &frag_needed(&syn));
    assert_eq!(
        s.frames(&seen, "node0-pod0").len(),
        1,
        "the error reaches A"
    );
    // The same error quoting a connection A never opened: denied at node0.
    let never = frames::tcp((pod_mac(0), pod_ip(0), 40003), (GW_A, B2, 81), true, b"");
    let seen = s.send(1, 1, &frag_needed(&never));
    assert!(s.frames(&seen, "node0-pod0").is_empty(), "denied at node0");
    s.assert_goldens("l2_20_icmp_error_across_ingress_deny");
}

#[test]
fn l2_31_frames_inside_the_segment_never_meet_its_acl() {
    let mut s = scene();
    // Pod 0 to Pod 1, both in A, across Nodes: switched, byte for byte, though A's
    // ACL denies everything in and TCP 23 out.
    let syn = frames::tcp(
        (pod_mac(0), pod_ip(0), 40002),
        (pod_mac(1), pod_ip(1), 23),
        true,
        b"",
    );
    let seen = s.send(0, 0, &syn);
    assert_eq!(s.frames(&seen, "node1-pod0"), &vec![syn.clone()]);
    let back = frames::tcp(
        (pod_mac(1), pod_ip(1), 23),
        (pod_mac(0), pod_ip(0), 40002),
        false,
        b"x",
    );
    let seen = s.send(1, 0, &back);
    assert_eq!(s.frames(&seen, "node0-pod0"), &vec![back.clone()]);
    s.assert_goldens("l2_31_inside_the_segment");
}
