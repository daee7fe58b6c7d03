//! Frames nobody sends politely, through each program by BPF_PROG_TEST_RUN: the
//! verdict, the drop counted (under its reason, and no other), and nothing learned that
//! must not be. A Pod's port forwards whatever it gets (L2-01: the segment is a wire),
//! bar frames it cannot forward; the underlay program takes only sound VXLAN frames for
//! local Pods and leaves everything else to the Node's stack (which validates it).
use std::collections::BTreeMap;

use aya::programs::TestRun as _;
use juneau::node::dataplane::{PortKind, PortSpec, Whole};
use juneau_harness::{
    frames::{self, BROADCAST, fixtures::*},
    testrun::{PortBed, TC_ACT_REDIRECT, run_tc},
};
use rstest::rstest;

const VNI: u32 = 5150;
const MTU: u32 = 9000;
const TC_ACT_OK: u32 = 0;
/// A source no case may teach the table.
const STRANGER: [u8; 6] = [0x02, 0x5e, 0x00, 0x00, 0x00, 0x01];

struct Bed {
    bed: PortBed,
    dp: Whole,
}

/// Two ports on one segment (MTU 9000) with an underlay and the overlay: port 1's Pod
/// has spoken, so its MAC is known.
fn bed() -> Bed {
    let bed = PortBed::new(2);
    let mut dp = bed.bring_up_node();
    for i in 0..2 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i),
            vni: VNI,
            mtu: MTU,
            peer: true,
            security_groups: false,
            kind: PortKind::Switched,
        })
        .unwrap();
    }
    let b = Bed { bed, dp };
    let hello = b.port(1, &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hello"));
    assert_eq!(hello.verdict, TC_ACT_REDIRECT);
    b
}

impl Bed {
    fn port(&self, i: usize, frame: &[u8]) -> juneau_harness::testrun::Run {
        run_tc(
            &self.bed.ns,
            self.dp.l2_port_program(),
            self.bed.ifindex(i),
            frame,
            1,
        )
    }

    fn underlay(&self, frame: &[u8]) -> juneau_harness::testrun::Run {
        let prog = self.dp.program("underlay_ingress");
        run_tc(&self.bed.ns, prog, self.bed.ifindex(0), frame, 1)
    }

    fn drops(&self) -> BTreeMap<&'static str, u64> {
        self.dp.drops().unwrap()
    }

    fn learned(&self, mac: [u8; 6]) -> bool {
        self.dp.fdb(VNI).unwrap().iter().any(|(k, _)| k.mac == mac)
    }
}

/// What changed in the drop counters, by reason.
fn delta(
    before: &BTreeMap<&'static str, u64>,
    after: &BTreeMap<&'static str, u64>,
) -> Vec<(&'static str, u64)> {
    after
        .iter()
        .filter_map(|(k, v)| (*v != before[k]).then_some((*k, v - before[k])))
        .collect()
}

fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, rest: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(rest);
    f
}

fn padded(mut f: Vec<u8>) -> Vec<u8> {
    f.resize(f.len().max(60), 0);
    f
}

/// An IPv4 header (no options) with `ihl_byte`, `tot_len`, protocol `proto`, then `rest`.
fn ipv4(ihl_byte: u8, tot_len: u16, proto: u8, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![ihl_byte, 0];
    h.extend_from_slice(&tot_len.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0, 10, 0, 1, 10, 10, 0, 1, 11]);
    h.extend_from_slice(rest);
    h
}

#[rstest]
#[case::truncated_802_1q_tag(frame(pod_mac(1), STRANGER, 0x8100, &[]), true)]
#[case::qinq_802_1ad_outer_tag(padded(frame(pod_mac(1), STRANGER, 0x88a8, &[0, 10, 0x81, 0, 0, 20, 0x88, 0xb5])), true)]
#[case::ipv4_ihl_below_5(padded(frame(pod_mac(1), STRANGER, 0x0800, &ipv4(0x44, 40, 17, &[]))), true)]
#[case::ipv4_total_length_beyond_the_frame(padded(frame(pod_mac(1), STRANGER, 0x0800, &ipv4(0x45, 1500, 17, &[]))), true)]
#[case::truncated_udp(frame(pod_mac(1), STRANGER, 0x0800, &ipv4(0x45, 24, 17, &[0, 9, 0, 9])), true)]
#[case::multicast_source(padded(frame(pod_mac(1), [0x01, 0x00, 0x5e, 0, 0, 9], 0x88b5, &[])), false)]
#[case::all_zero_source(padded(frame(pod_mac(1), [0; 6], 0x88b5, &[])), false)]
#[case::stp_bpdu(padded(frame([0x01, 0x80, 0xc2, 0, 0, 0], STRANGER, 0x0026, &[0x42, 0x42, 0x03, 0, 0, 0, 0])), true)]
#[case::lacp(padded(frame([0x01, 0x80, 0xc2, 0, 0, 2], STRANGER, 0x8809, &[0x01, 0x01])), true)]
fn l2_01_l2_28_a_port_forwards_odd_frames_untouched(
    #[case] f: Vec<u8>,
    #[case] source_learnable: bool,
) {
    let b = bed();
    let before = b.drops();
    let run = b.port(0, &f);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "forwarded");
    assert_eq!(run.data, f, "untouched");
    assert_eq!(delta(&before, &b.drops()), vec![], "nothing dropped");
    let src: [u8; 6] = f[6..12].try_into().unwrap();
    assert_eq!(b.learned(src), source_learnable, "learned {src:02x?}");
}

/// Test runs take at most a page of data, so jumbo frames go through the netns
/// datapath: a 9,000-byte payload crosses a 9,000-MTU segment; one byte more never
/// leaves the Pod (the kernel refuses it at the Pod's own NIC).
#[test]
fn l2_21_a_jumbo_frame_at_exactly_the_mtu_crosses_and_one_byte_more_is_refused_by_the_kernel() {
    use juneau_harness::{
        Capture,
        capture::try_inject,
        node::{Node, PodOptions},
    };
    let mut node = Node::new();
    for i in 0..2 {
        node.add_pod_with(i, PodOptions::vni(VNI).mtu(MTU));
    }
    let cap = Capture::start(&node.pods[1].ns, "eth0", "pod1");
    let at_mtu = frame(pod_mac(1), pod_mac(0), 0x88b5, &vec![0xab; MTU as usize]);
    try_inject(&node.pods[0].ns, "eth0", &at_mtu).expect("a frame of exactly the MTU");
    let got = cap.received(std::time::Duration::from_millis(300));
    assert_eq!(got, vec![at_mtu], "delivered whole");
    let above = frame(
        pod_mac(1),
        pod_mac(0),
        0x88b5,
        &vec![0xab; MTU as usize + 1],
    );
    let err = try_inject(&node.pods[0].ns, "eth0", &above).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE), "{err}");
    assert!(
        cap.received(std::time::Duration::from_millis(300))
            .is_empty()
    );
    assert_eq!(
        node.dataplane.drops().unwrap()["TOO_BIG"],
        0,
        "it never reached the port"
    );
}

#[test]
fn l2_28_a_frame_shorter_than_an_ethernet_header_never_reaches_a_program() {
    // The kernel refuses it before any program runs (BPF_PROG_TEST_RUN: EINVAL), as it
    // refuses to send one (AF_PACKET pads or rejects): nothing to count.
    let b = bed();
    let prog = b.dp.l2_port_program();
    for len in [0usize, 6, 13] {
        let f = vec![0x02; len];
        let r = b.bed.ns.run(|| {
            prog.test_run(aya::programs::TestRunOptions {
                data_in: Some(&f),
                repeat: 1,
                ..Default::default()
            })
        });
        let err = format!("{:?}", r.expect_err("a runt reached the program"));
        assert!(err.contains("Invalid argument"), "{len} bytes: {err}");
    }
}

/// A VXLAN frame from node 10.99.0.2 for Pod 1 (known, local) on segment `vni`, with
/// `fix` applied to the whole frame before sending.
fn vxlan_to_pod1(vni: u32, inner_len: usize, fix: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let inner = frames::udp(
        (STRANGER, [10, 0, 1, 99]),
        (pod_mac(1), pod_ip(1)),
        &[0; 18],
    );
    let mut f = frames::vxlan(
        ([0x02, 0, 0, 0x99, 0, 2], [0x02, 0, 0, 0x99, 0, 1]),
        [10, 99, 0, 2],
        [10, 99, 0, 1],
        vni,
        &inner[..inner_len.min(inner.len())],
    );
    fix(&mut f);
    f
}

/// Rewrites the outer IPv4 header checksum after a change.
fn outer_checksum(f: &mut [u8]) {
    f[24..26].fill(0);
    let mut sum: u32 = (0..10)
        .map(|i| u16::from_be_bytes([f[14 + 2 * i], f[15 + 2 * i]]) as u32)
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

#[rstest]
#[case::vxlan_shorter_than_its_header(vxlan_to_pod1(VNI, 0, |f| { f.truncate(46); }))]
#[case::a_vni_this_node_does_not_serve(vxlan_to_pod1(VNI + 1, 60, |_| {}))]
#[case::inner_frame_shorter_than_14_bytes(vxlan_to_pod1(VNI, 10, |_| {}))]
#[case::outer_ihl_below_5(vxlan_to_pod1(VNI, 60, |f| { f[14] = 0x44; outer_checksum(f); }))]
#[case::outer_total_length_beyond_the_frame(vxlan_to_pod1(VNI, 60, |f| { f[16..18].copy_from_slice(&1400u16.to_be_bytes()); outer_checksum(f); }))]
#[case::outer_header_checksum_wrong(vxlan_to_pod1(VNI, 60, |f| { f[24] ^= 0xff; }))]
#[case::udp_length_beyond_the_ip_packet(vxlan_to_pod1(VNI, 60, |f| { let l = u16::from_be_bytes([f[16], f[17]]); f[38..40].copy_from_slice(&(l - 10).to_be_bytes()); }))]
fn l2_28_the_underlay_program_leaves_unsound_vxlan_to_the_stack_and_learns_nothing(
    #[case] f: Vec<u8>,
) {
    let b = bed();
    // The same frame made sound is decapsulated and delivered (the cases differ from it
    // only in what they break).
    let sound = vxlan_to_pod1(VNI, 60, |_| {});
    let before = b.drops();
    let run = b.underlay(&f);
    assert_eq!(run.verdict, TC_ACT_OK, "passed to the stack");
    assert_eq!(run.data, f, "untouched");
    assert_eq!(
        delta(&before, &b.drops()),
        vec![],
        "nothing counted as dropped"
    );
    assert!(
        !b.learned(STRANGER),
        "learned the inner source of an unsound frame"
    );
    let ok = b.underlay(&sound);
    assert_eq!(ok.verdict, TC_ACT_REDIRECT, "the sound frame is delivered");
    assert_eq!(ok.data, sound[50..]);
    assert!(b.learned(STRANGER));
}

/// L2-01: the segment is a wire, so the link-local control protocols a bridge would
/// keep to itself (STP BPDUs to 01:80:c2:00:00:00, LACP to 01:80:c2:00:00:02) reach
/// every other Pod, across Nodes too.
#[test]
fn l2_01_stp_bpdus_and_lacp_cross_a_pure_segment_like_any_frame() {
    use juneau_harness::{
        node::{Cluster, PodOptions},
        scene::Scene,
    };
    let mut c = Cluster::new(2);
    c.add_pod(0, 0, PodOptions::vni(VNI));
    c.add_pod(0, 1, PodOptions::vni(VNI));
    c.add_pod(1, 2, PodOptions::vni(VNI));
    let mut s = Scene::new(c);
    let bpdu = padded(frame(
        [0x01, 0x80, 0xc2, 0, 0, 0],
        pod_mac(0),
        0x0026,
        &[
            0x42, 0x42, 0x03, 0, 0, 0, 0, 0x80, 0, 0x02, 0, 0, 0, 0, 1, 0,
        ],
    ));
    let lacp = padded(frame(
        [0x01, 0x80, 0xc2, 0, 0, 2],
        pod_mac(0),
        0x8809,
        &[0x01, 0x01, 0x01, 0x14],
    ));
    for f in [&bpdu, &lacp] {
        let seen = s.send(0, 0, f);
        assert_eq!(s.frames(&seen, "node0-pod1"), &vec![f.clone()], "same Node");
        assert_eq!(
            s.frames(&seen, "node1-pod0"),
            &vec![f.clone()],
            "other Node"
        );
        assert!(
            s.frames(&seen, "node0-pod0").is_empty(),
            "not back to the sender"
        );
    }
    s.assert_goldens("l2_01_stp_and_lacp_cross_a_pure_segment");
}

/// The same unsound VXLAN frames on the wire of a whole Node (sent by the underlay's
/// switch port to the Node's NIC): the underlay program leaves them to the stack, the
/// kernel's checks or `overlay_ingress` stop each, and no Pod sees any. The one the
/// kernel hands to the VXLAN device (a VNI nobody serves) is counted by `overlay_ingress`.
#[rstest]
#[case::vxlan_shorter_than_its_header(vxlan_to_pod1(VNI, 0, |f| { f.truncate(46); }), None)]
#[case::a_vni_this_node_does_not_serve(vxlan_to_pod1(VNI + 1, 60, |_| {}), Some("UNKNOWN_VNI"))]
#[case::inner_frame_shorter_than_14_bytes(vxlan_to_pod1(VNI, 10, |_| {}), None)]
#[case::outer_ihl_below_5(vxlan_to_pod1(VNI, 60, |f| { f[14] = 0x44; outer_checksum(f); }), None)]
#[case::outer_total_length_beyond_the_frame(vxlan_to_pod1(VNI, 60, |f| { f[16..18].copy_from_slice(&1400u16.to_be_bytes()); outer_checksum(f); }), None)]
#[case::outer_header_checksum_wrong(vxlan_to_pod1(VNI, 60, |f| { f[24] ^= 0xff; }), None)]
#[case::udp_length_beyond_the_ip_packet(vxlan_to_pod1(VNI, 60, |f| { let l = u16::from_be_bytes([f[16], f[17]]); f[38..40].copy_from_slice(&(l - 10).to_be_bytes()); }), None)]
fn l2_28_unsound_vxlan_on_a_nodes_wire_reaches_no_pod(
    #[case] f: Vec<u8>,
    #[case] counted: Option<&str>,
) {
    use std::time::Duration;

    use juneau_harness::{
        capture::{Capture, inject},
        node::{Cluster, PodOptions},
    };
    // Node 0 hosts Pods 0 and 1 of the segment; the frames come from node 1's address.
    let mut c = Cluster::new(2);
    c.add_pod(0, 0, PodOptions::vni(VNI));
    let p1 = c.add_pod(0, 1, PodOptions::vni(VNI));
    let pod1 = &c.pod(0, p1).ns;
    let dp = &c.nodes[0].dataplane;
    let learned = |mac: [u8; 6]| dp.fdb(VNI).unwrap().iter().any(|(k, _)| k.mac == mac);
    let quiet = Duration::from_millis(300);
    let before = dp.drops().unwrap();
    let cap = Capture::start(pod1, "eth0", "pod1");
    inject(&c.underlay, "n0", &f);
    assert_eq!(cap.received(quiet), Vec::<Vec<u8>>::new(), "a Pod got it");
    assert!(
        !learned(STRANGER),
        "learned the inner source of an unsound frame"
    );
    let want: Vec<(&str, u64)> = counted.map(|r| (r, 1)).into_iter().collect();
    assert_eq!(delta(&before, &dp.drops().unwrap()), want);
    // The frame made sound crosses: the path was live and the capture would have seen it.
    let cap = Capture::start(pod1, "eth0", "pod1");
    inject(&c.underlay, "n0", &vxlan_to_pod1(VNI, 60, |_| {}));
    assert_eq!(cap.received(quiet).len(), 1, "the sound frame is delivered");
    assert!(learned(STRANGER));
}
