//! One Node, Pods on L2Network segments: frames switched by Juneau's eBPF between Pod
//! namespaces, proven by golden captures of what every Pod receives.
//!
//! Each test builds its own namespaces (removed on drop, also on failure) and injects
//! raw frames with AF_PACKET inside the Pods.
use std::time::Duration;

use juneau_harness::{
    Capture, Node,
    capture::inject,
    frames::{self, fixtures::*},
    golden::assert_goldens,
};

const VNI: u32 = 100;
const QUIET: Duration = Duration::from_millis(150);

/// A Node with `n` Pods on segment `VNI` and a capture on every Pod's eth0.
fn setup(n: u8) -> (Node, Vec<Capture>) {
    let mut node = Node::new();
    for i in 0..n {
        node.add_pod(i, VNI);
    }
    let caps = node
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| Capture::start(&p.ns, &p.ifname, &format!("pod{i}")))
        .collect();
    (node, caps)
}

/// Sends `frame` from Pod `i` and returns what each capture received after it.
fn step(node: &Node, caps: &[Capture], i: usize, frame: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let pod = &node.pods[i];
    inject(&pod.ns, &pod.ifname, frame);
    caps.iter().map(|c| c.received(QUIET)).collect()
}

/// Appends one step's frames to the running per-capture record.
fn record(all: &mut [Vec<Vec<u8>>], step: Vec<Vec<Vec<u8>>>) {
    for (a, s) in all.iter_mut().zip(step) {
        a.extend(s);
    }
}

fn check(test: &str, caps: &[Capture], all: Vec<Vec<Vec<u8>>>) {
    let pairs: Vec<_> = caps.iter().zip(all).collect();
    assert_goldens(test, &pairs);
}

#[test]
fn l2_28_arp_request_floods_to_every_other_pod_and_reply_reaches_only_the_asker() {
    let (node, caps) = setup(3);
    let request = frames::arp_request(pod_mac(0), pod_ip(0), pod_ip(1));
    let reply = frames::arp_reply(pod_mac(1), pod_ip(1), pod_mac(0), pod_ip(0));
    let mut all = vec![Vec::new(); 3];

    let s = step(&node, &caps, 0, &request);
    assert_eq!(s[0].len(), 0, "the request came back to its sender");
    assert_eq!(
        s[1],
        vec![request.clone()],
        "pod1 must get the request once, unchanged"
    );
    assert_eq!(
        s[2],
        vec![request.clone()],
        "pod2 must get the request once, unchanged"
    );
    record(&mut all, s);

    let s = step(&node, &caps, 1, &reply);
    assert_eq!(s[0], vec![reply.clone()], "the asker must get the reply");
    assert!(
        s[1].is_empty() && s[2].is_empty(),
        "the reply leaked: {s:?}"
    );
    record(&mut all, s);

    check("l2_28_arp_exchange", &caps, all);
}

#[test]
fn l2_28_unicast_to_a_learned_mac_reaches_only_its_pod() {
    let (node, caps) = setup(3);
    let mut all = vec![Vec::new(); 3];
    // Pod 1 announces itself (flooded), which teaches the segment where it is.
    let hello = frames::raw(frames::BROADCAST, pod_mac(1), 0x88b5, b"hello from pod1");
    record(&mut all, step(&node, &caps, 1, &hello));
    let unicast = frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"to pod1 only");
    let s = step(&node, &caps, 0, &unicast);
    assert_eq!(s[1], vec![unicast.clone()]);
    assert!(
        s[0].is_empty() && s[2].is_empty(),
        "known unicast was flooded: {s:?}"
    );
    record(&mut all, s);
    check("l2_28_known_unicast", &caps, all);
}

#[test]
fn l2_01_any_ethertype_passes_unchanged() {
    let (node, caps) = setup(3);
    let mut all = vec![Vec::new(); 3];
    let mut vlan = frames::raw(
        frames::BROADCAST,
        pod_mac(0),
        0x8100,
        &[0x00, 0x2a, 0x88, 0xb5],
    );
    vlan.truncate(18);
    vlan.extend_from_slice(b"tagged vlan 42");
    vlan.resize(64, 0);
    let sent = [
        frames::raw(
            frames::BROADCAST,
            pod_mac(0),
            0x88b5,
            b"local experimental ethertype",
        ),
        frames::lldp(pod_mac(0)),
        frames::ipv6_ns(pod_mac(0), pod_ip6(0), pod_ip6(1)),
        vlan,
    ];
    for f in &sent {
        let s = step(&node, &caps, 0, f);
        for (i, got) in s.iter().enumerate().skip(1) {
            assert_eq!(
                got,
                &vec![f.clone()],
                "pod{i} must receive the frame byte for byte"
            );
        }
        assert!(s[0].is_empty());
        record(&mut all, s);
    }
    check("l2_01_any_ethertype", &caps, all);
}

#[test]
fn l2_28_broadcast_never_returns_to_its_sender() {
    let (node, caps) = setup(3);
    let mut all = vec![Vec::new(); 3];
    for i in 0..3 {
        let b = frames::raw(frames::BROADCAST, pod_mac(i as u8), 0x88b5, b"broadcast");
        let s = step(&node, &caps, i, &b);
        for (j, got) in s.iter().enumerate() {
            let want = usize::from(j != i);
            assert_eq!(
                got.len(),
                want,
                "pod{j} got {} copies of pod{i}'s broadcast",
                got.len()
            );
        }
        record(&mut all, s);
    }
    check("l2_28_broadcast_split", &caps, all);
}

#[test]
fn l2_28_frame_to_a_mac_behind_its_own_ingress_port_is_dropped() {
    let (node, caps) = setup(3);
    let mut all = vec![Vec::new(); 3];
    let vm = behind_mac(0, 1);
    // A host behind Pod 0's bridge speaks: learned on Pod 0's port (L2-29).
    record(
        &mut all,
        step(
            &node,
            &caps,
            0,
            &frames::raw(frames::BROADCAST, vm, 0x88b5, b"vm"),
        ),
    );
    let before = node.dataplane.drops().unwrap()["HAIRPIN"];
    let s = step(
        &node,
        &caps,
        0,
        &frames::raw(vm, pod_mac(0), 0x88b5, b"to my own vm"),
    );
    assert!(
        s.iter().all(|c| c.is_empty()),
        "hairpin frame was delivered: {s:?}"
    );
    assert_eq!(node.dataplane.drops().unwrap()["HAIRPIN"], before + 1);
    record(&mut all, s);
    check("l2_28_hairpin", &caps, all);
}

#[test]
fn l2_28_a_mac_that_moves_to_another_port_is_followed_at_once() {
    let (node, caps) = setup(3);
    let mut all = vec![Vec::new(); 3];
    let roamer = behind_mac(9, 9);
    let from = |i: usize| frames::raw(frames::BROADCAST, roamer, 0x88b5, &[b'a' + i as u8; 20]);
    let to_roamer = frames::raw(roamer, pod_mac(2), 0x88b5, b"where are you");
    // At pod0, then at pod1, then back at pod0, each within the learning refresh second.
    for at in [0usize, 1, 0] {
        record(&mut all, step(&node, &caps, at, &from(at)));
        let s = step(&node, &caps, 2, &to_roamer);
        for (j, got) in s.iter().enumerate() {
            let want = usize::from(j == at);
            assert_eq!(
                got.len(),
                want,
                "after moving to pod{at}, pod{j} got {} frames",
                got.len()
            );
        }
        record(&mut all, s);
    }
    check("l2_28_mac_move", &caps, all);
}

#[test]
fn l2_29_only_the_datapath_writes_the_learning_table() {
    let (node, caps) = setup(2);
    assert!(
        node.dataplane.fdb(VNI).unwrap().is_empty(),
        "the table must start empty: no static entries from NetworkEndpoints"
    );
    let vm = behind_mac(1, 7);
    step(
        &node,
        &caps,
        1,
        &frames::raw(frames::BROADCAST, vm, 0x0800, b"any mac behind a port"),
    );
    let fdb = node.dataplane.fdb(VNI).unwrap();
    assert_eq!(fdb.len(), 1, "{fdb:?}");
    assert_eq!(fdb[0].0.mac, vm);
    assert_eq!(fdb[0].1.ifindex, node.pods[1].host_ifindex);
    assert_eq!(fdb[0].1.vtep, 0);
}

#[test]
fn l2_31_two_segments_on_one_node_never_see_each_other() {
    let mut node = Node::new();
    node.add_pod(0, 100);
    node.add_pod(1, 100);
    node.add_pod(2, 200);
    node.add_pod(3, 200);
    let caps: Vec<_> = node
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| Capture::start(&p.ns, &p.ifname, &format!("pod{i}")))
        .collect();
    let mut all = vec![Vec::new(); 4];
    // Broadcast, then known unicast (pod3 learned), then unknown unicast, all from pod0.
    record(
        &mut all,
        step(
            &node,
            &caps,
            3,
            &frames::raw(frames::BROADCAST, pod_mac(3), 0x88b5, b"seg200"),
        ),
    );
    for dst in [frames::BROADCAST, pod_mac(3), pod_mac(42)] {
        let s = step(
            &node,
            &caps,
            0,
            &frames::raw(dst, pod_mac(0), 0x88b5, b"seg100"),
        );
        assert!(
            s[2].is_empty() && s[3].is_empty(),
            "segment 100 leaked into 200: {s:?}"
        );
        assert_eq!(s[1].len(), 1);
        record(&mut all, s);
    }
    check("l2_31_isolation_one_node", &caps, all);
}
