//! Packet rate of direct ElasticIPs on one Node, live frames side by side in one run
//! (median of interleaved rounds). The kernel has no pktgen: an XDP live-frames test
//! run in the sender Pod transmits 64-byte IPv4/UDP frames (XDP_TX on its eth0,
//! written afresh for every frame since every path here rewrites MACs and TTL);
//! delivery is counted by the receiving namespace's eth0 rx counter, never by the
//! generator, and a `floor_drop` program there drops the frames after the count (the
//! receiver's own IP stack would cap every path and hide the difference).
//!
//! 1. `pps_eip_to_outside_vs_ip_forward`: a Pod holding ElasticIP 10.99.0.100 sends to
//!    198.51.100.10 (to the gateway MAC): `port_ingress` -> tail call `eip_port` ->
//!    `bpf_fib_lookup` -> `bpf_redirect` out of the Node's uplink (`ul0`) to the
//!    upstream router's namespace. Baseline: the same shape without Juneau, a plain veth
//!    Pod and the Node namespace's kernel forwarding the same frames (`ip_forward`, the
//!    same default route via the upstream, the same permanent neighbour, no netfilter
//!    rules). Fair: same frames, same uplink and upstream, same counter; the Juneau
//!    Node's kernel forwards nothing in its rounds (checked: `ForwDatagrams`). Beside it,
//!    `pps_eip_to_outside_vs_bare_redirect`: the ceiling of that path here, one bare
//!    `bpf_redirect` (`floor_redirect`) from a plain Pod's veth to the same kind of uplink.
//! 2. `pps_eip_same_node_vs_uplink_turnaround`: ElasticIP .100 to ElasticIP .101 on the
//!    same Node, delivered in place (`eip_port` -> `bpf_redirect_peer`), against the
//!    reference's way on the same Node, datapath and receiver: the frame is handed to
//!    the uplink's ingress by the floor object's `floor_to_ingress` on the sender's veth
//!    (one lookup, destination MAC := the uplink's, `bpf_redirect(ul0, BPF_F_INGRESS)`)
//!    and Juneau's own `underlay_ingress` -> `eip_uplink` delivers it. That first program
//!    does less than any real Pod-egress program (no source guard, no lookup), so the
//!    baseline is on the generous side. Beside it, `pps_eip_same_node_vs_bare_redirect_peer`:
//!    the ceiling of an in-place delivery here, one bare `bpf_redirect_peer`
//!    (`floor_redirect_peer`) from a plain Pod's veth into another Pod.
//!
//! Juneau's ports are attached as the daemon attaches them by default (tc filters).
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::programs::{SchedClassifier, TcAttachType};
use juneau::node::dataplane::Holder;
use juneau_common::eip::gateway_mac;
use juneau_harness::{
    Netns, Node,
    bench::{
        LiveFrames, Measurement, forwarded, gro_on, median, plain_pods, redirect_peer_bed,
        write_part,
    },
    frames::{self, fixtures::pod_mac},
    uplink::{self, ROUTER_MAC, UPLINK_MAC, if_index, ip, mac_of, uplink},
};

const VNI: u32 = 4097;
const OUTSIDE: [u8; 4] = [198, 51, 100, 10];
const fn eip(i: u8) -> [u8; 4] {
    [10, 99, 0, 100 + i]
}

/// A Node brought up by the daemon's own code on `ul0`, with Pods 0 and 1 holding
/// ElasticIPs .100 and .101 directly (both held here). Returns it and its upstream.
fn juneau_node() -> (Node, Netns) {
    let (mut node, upstream) = uplink::juneau_node();
    let vtep = node.ip.expect("the Node's address");
    let holders: BTreeMap<Ipv4Addr, Holder> = (0..2u8)
        .map(|i| {
            node.add_eip_pod(i, VNI, eip(i));
            let holder = Holder {
                mac: pod_mac(i),
                vni: VNI,
                node: vtep,
                pod_ip: None,
            };
            (Ipv4Addr::from(eip(i)), holder)
        })
        .collect();
    node.dataplane.set_elastic_ips(&holders).unwrap();
    gro_on(&node.ns, "jp0");
    (node, upstream)
}

/// The same shape without Juneau: a plain veth Pod (`h0` in the Node, MAC
/// `pod_mac(0)`), the Node route `.100/32 dev h0` and no reverse-path check on it (as
/// the daemon plumbs a direct NIC), the same uplink. Returns (Node, Pod, upstream,
/// h0's MAC).
fn plain_bed() -> (Netns, Netns, Netns, [u8; 6]) {
    let (node, mut pods) = plain_pods(1);
    let upstream = uplink(&node);
    ip(&node, "route add 10.99.0.100/32 dev h0");
    node.sysctl("net.ipv4.conf.h0.rp_filter", "0");
    gro_on(&node, "h0");
    let h0 = mac_of(&node, "h0");
    (node, pods.pop().unwrap(), upstream, h0)
}

/// `ToIngress` of the floor object: where `floor_to_ingress` hands a frame.
#[repr(C)]
#[derive(Clone, Copy)]
struct ToIngress {
    ifindex: u32,
    mac: [u8; 6],
    pad: [u8; 2],
}

// SAFETY: plain old data, as the floor object's map holds it.
unsafe impl aya::Pod for ToIngress {}

/// The baseline's sender: a plain veth `bl0` in the Juneau Node into a new Pod (MAC
/// `pod_mac(2)`), whose frames `floor_to_ingress` (attached in `main`) hands to the
/// uplink's ingress addressed to the uplink's MAC: the reference's first hop, the least
/// it can be (no source guard, no lookup of its own).
fn turnaround_sender(node: &Node) -> Netns {
    let pod = Netns::new("pod");
    node.ns.add_veth("bl0", &pod, "eth0", None);
    let mac = juneau::format_mac(&pod_mac(2));
    ip(&pod, &format!("link set eth0 address {mac} up"));
    ip(&node.ns, "link set bl0 up");
    gro_on(&node.ns, "bl0");
    pod
}

fn main() {
    let quick = std::env::var_os("JUNEAU_BENCH_QUICK").is_some();
    let (count, rounds): (u32, usize) = if quick { (200_000, 3) } else { (1_000_000, 7) };
    let mut generator = LiveFrames::load();
    let (node, upstream) = juneau_node();
    let (k_node, k_pod, k_upstream, h0) = plain_bed();
    let (c_node, c_pod, c_upstream, _) = plain_bed();
    let bl_pod = turnaround_sender(&node);
    let (peer_a, peer_b, _peer_bed) = redirect_peer_bed();
    let (pod0, pod1) = (&node.pods[0].ns, &node.pods[1].ns);
    // The floor object: every receiver drops at its eth0's ingress (after the rx
    // counter); the ceiling bed's h0 forwards by one bare bpf_redirect to its uplink.
    let mut floor = aya::EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    let fwd = c_node.run(|| (if_index("h0"), if_index("ul0")));
    aya::maps::HashMap::<_, u32, u32>::try_from(floor.map_mut("jn_floor_fwd").unwrap())
        .unwrap()
        .insert(fwd.0, fwd.1, 0)
        .unwrap();
    let (bl0, ul0) = node.ns.run(|| (if_index("bl0"), if_index("ul0")));
    let to_uplink = ToIngress {
        ifindex: ul0,
        mac: UPLINK_MAC,
        pad: [0; 2],
    };
    aya::maps::HashMap::<_, u32, ToIngress>::try_from(floor.map_mut("jn_floor_ingress").unwrap())
        .unwrap()
        .insert(bl0, to_uplink, 0)
        .unwrap();
    for (name, at) in [
        (
            "floor_drop",
            vec![&upstream, &k_upstream, &c_upstream, pod1, &peer_b],
        ),
        ("floor_redirect", vec![&c_node]),
        ("floor_to_ingress", vec![&node.ns]),
    ] {
        let prog: &mut SchedClassifier = floor.program_mut(name).unwrap().try_into().unwrap();
        prog.load().unwrap_or_else(|e| panic!("load {name}: {e}"));
        let dev = match name {
            "floor_drop" => "eth0",
            "floor_redirect" => "h0",
            _ => "bl0",
        };
        for ns in at {
            ns.run(|| prog.attach(dev, TcAttachType::Ingress))
                .unwrap_or_else(|e| panic!("attach {name}: {e}"));
        }
    }
    let pad = [0u8; 22]; // 64-byte frames: the generator writes 64 bytes afresh.
    let (src, gw) = ((pod_mac(0), eip(0)), gateway_mac(VNI));
    let out_j = frames::udp(src, (gw, OUTSIDE), &pad);
    let out_k = frames::udp(src, (h0, OUTSIDE), &pad);
    let out_c = frames::udp(src, (ROUTER_MAC, OUTSIDE), &pad);
    let in_place = frames::udp(src, (gw, eip(1)), &pad);
    let via_uplink = frames::udp((pod_mac(2), eip(2)), (gw, eip(1)), &pad);
    let paths: [(&str, &Netns, &Netns, &[u8]); 6] = [
        ("juneau to outside", pod0, &upstream, &out_j),
        ("ip_forward to outside", &k_pod, &k_upstream, &out_k),
        ("bare bpf_redirect to outside", &c_pod, &c_upstream, &out_c),
        ("juneau in place", pod0, pod1, &in_place),
        ("via uplink ingress", &bl_pod, pod1, &via_uplink),
        (
            "bare bpf_redirect_peer in place",
            &peer_a,
            &peer_b,
            &in_place,
        ),
    ];
    let mut blast = |i: usize| {
        let (_, tx, rx, frame) = paths[i];
        generator.blast_fresh(tx, "eth0", rx, frame, count) * 1e6
    };
    // `JN_EIP_PPS_ONLY=<0..5>` blasts one path only and prints, to profile it alone
    // (`perf record -C 1`).
    if let Ok(only) = std::env::var("JN_EIP_PPS_ONLY") {
        let i = only.parse::<usize>().expect("a path index");
        for _ in 0..rounds {
            println!("{}: {:.0} pps", paths[i].0, blast(i));
        }
        return;
    }
    let (fwd_j, fwd_k) = (forwarded(&node.ns), forwarded(&k_node));
    let mut r: [Vec<f64>; 6] = Default::default();
    for round in 0..rounds {
        // Each round starts with another path: no path always runs first.
        for i in (0..paths.len()).map(|j| (j + round) % paths.len()) {
            r[i].push(blast(i));
        }
    }
    let m = r.map(|mut v| median(&mut v));
    // Each path is the one claimed: the Juneau Node's kernel forwarded none of its
    // frames (a failed FIB lookup would have left them to it), the baseline's did.
    let (fwd_j, fwd_k) = (forwarded(&node.ns) - fwd_j, forwarded(&k_node) - fwd_k);
    assert_eq!(fwd_j, 0, "the Juneau Node's kernel forwarded frames");
    assert!(fwd_k > 0, "the baseline's kernel forwarded nothing");
    let drops = node.dropped();
    assert!(drops.is_empty(), "the datapath dropped frames: {drops:?}");
    println!(
        "eip pps, one Node, median of {rounds} rotated rounds of {count}: {:?}",
        paths
            .iter()
            .map(|p| p.0)
            .zip(m.map(|v| v.round()))
            .collect::<Vec<_>>()
    );
    let how = format!(
        "64-byte IPv4/UDP frames written afresh by an XDP live-frames generator in the sender Pod (one CPU), counted at the receiving namespace's eth0 rx and dropped there; median of {rounds} rounds of {count}, the paths interleaved"
    );
    write_part(
        "eip_pps",
        &[
            Measurement::new(
                "pps_eip_to_outside_vs_ip_forward",
                "Mpps",
                m[0] / 1e6,
                ("linux_ip_forward", m[1] / 1e6),
                &format!(
                    "goal >= 1.5x; a direct ElasticIP NIC to 198.51.100.10: port_ingress -> eip_port -> bpf_fib_lookup -> bpf_redirect out of the Node's uplink to the upstream router's namespace (its kernel forwarded none); baseline: a plain veth Pod, the same frames forwarded by the Node namespace's kernel (ip_forward, the same default route via the upstream and permanent neighbour, no netfilter rules or conntrack) out of the same kind of uplink; {how}"
                ),
            ),
            Measurement::new(
                "pps_eip_to_outside_vs_bare_redirect",
                "Mpps",
                m[0] / 1e6,
                ("bare_bpf_redirect", m[2] / 1e6),
                &format!(
                    "the ceiling of the same path here: one bpf_redirect by ingress ifindex from the Pod's veth to the uplink (floor_redirect), nothing looked up or rewritten; {how}"
                ),
            ),
            Measurement::new(
                "pps_eip_same_node_vs_uplink_turnaround",
                "Mpps",
                m[3] / 1e6,
                ("redirect_to_uplink_ingress", m[4] / 1e6),
                &format!(
                    "goal >= 1.3x; ElasticIP to ElasticIP on one Node delivered in place (port_ingress -> eip_port -> bpf_redirect_peer) vs the reference's way on the same Node, datapath and receiver: the floor object's floor_to_ingress on the sender's veth (one lookup, destination MAC := the uplink's, bpf_redirect(uplink, BPF_F_INGRESS)), then underlay_ingress -> eip_uplink delivers (bpf_redirect_peer); that first program does less than the reference's Pod-egress program (no source guard, no lookup), so the baseline is generous; {how}"
                ),
            ),
            Measurement::new(
                "pps_eip_same_node_vs_bare_redirect_peer",
                "Mpps",
                m[3] / 1e6,
                ("bare_bpf_redirect_peer", m[5] / 1e6),
                &format!(
                    "the ceiling of an in-place delivery here: one bpf_redirect_peer by ingress ifindex from a plain Pod's veth into another Pod (floor_redirect_peer), nothing looked up or rewritten; that ceiling is {:.2}x the turnaround baseline; {how}",
                    m[5] / m[4]
                ),
            ),
        ],
    );
    drop(floor);
}
