//! `pps_eip_bgp_carried_vs_direct` (issue 27): the packet rate of frames from the
//! upstream router to a direct ElasticIP of a bgp pool, landing on a Node that does
//! not hold it (carried) against landing on the holder's Node (direct), live frames
//! side by side in one run (median of interleaved rounds).
//!
//! The bed: two Nodes brought up by the daemon's own code on the harness's underlay
//! bridge, Pod 0 on node0 holding 203.0.113.10, the pool announced by both (as
//! `wan-all` makes it), and an upstream namespace on the same bridge. An XDP
//! live-frames test run in the upstream transmits 64-byte IPv4/UDP frames (written
//! afresh for every frame) to node0's uplink MAC (direct: `underlay_ingress` ->
//! `eip_uplink` -> `bpf_redirect_peer` into the Pod) or node1's (carried:
//! `eip_uplink` -> VXLAN with VNI = networkID -> `bpf_redirect` out of node1's uplink,
//! across the bridge again -> node0's `underlay_ingress` decapsulates -> the Pod).
//! Delivery is counted by the Pod's eth0 rx counter, never by the generator; a
//! `floor_drop` program there drops the frames after the count (the Pod's own stack
//! would cap both paths and hide the difference). Neither Node's kernel forwards any
//! of them (checked: `ForwDatagrams`), neither datapath drops any.
//!
//! What bounds the ratio: the carried frame crosses the bridge twice and two Nodes'
//! programs (one encapsulation, one decapsulation); the direct one crosses once. An
//! upstream that ECMPs over N Nodes carries (N-1)/N of its frames this way.
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::programs::{SchedClassifier, TcAttachType};
use juneau::{
    node::dataplane::{Delivery, Holder},
    standalone::topology::node_mac,
};
use juneau_harness::{
    Netns,
    bench::{LiveFrames, Measurement, forwarded, gro_on, median, write_part},
    frames::{self, fixtures::pod_mac},
    node::{Cluster, node_ip},
    uplink::{ROUTER_MAC, ip},
};

const VNI: u32 = 4099;
const OUTSIDE: [u8; 4] = [198, 51, 100, 10];
const EIP: [u8; 4] = [203, 0, 113, 10];

fn main() {
    let quick = std::env::var_os("JUNEAU_BENCH_QUICK").is_some();
    let (count, rounds): (u32, usize) = if quick { (200_000, 3) } else { (1_000_000, 7) };
    let mut generator = LiveFrames::load();
    let mut c = Cluster::new(2);
    c.nodes[0].add_eip_pod(0, VNI, EIP);
    let holder = Holder {
        mac: pod_mac(0),
        vni: VNI,
        node: node_ip(0),
        pod_ip: None,
    };
    let holders = BTreeMap::from([(Ipv4Addr::from(EIP), holder)]);
    let pools = BTreeMap::from([("203.0.113.0/24".parse().unwrap(), Delivery::Here)]);
    for node in &mut c.nodes {
        node.dataplane.set_elastic_ips(&holders).unwrap();
        node.dataplane.set_ext_pools(&pools).unwrap();
    }
    // The upstream on the underlay bridge; the bridge knows both Nodes' MACs from the
    // start (nothing floods while the rounds run).
    let upstream = Netns::new("upstream");
    c.underlay.add_veth("rt0", &upstream, "eth0", None);
    let router = juneau::format_mac(&ROUTER_MAC);
    ip(&upstream, &format!("link set eth0 address {router} up"));
    ip(&c.underlay, "link set rt0 master br0 up");
    gro_on(&c.underlay, "rt0");
    for n in 0..2 {
        let port = format!("n{n}");
        c.underlay.exec(&[
            "bridge",
            "fdb",
            "replace",
            &node_mac(n),
            "dev",
            &port,
            "master",
            "static",
        ]);
    }
    let pod = &c.nodes[0].pods[0].ns;
    let mut floor = aya::EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    let drop_prog: &mut SchedClassifier =
        floor.program_mut("floor_drop").unwrap().try_into().unwrap();
    drop_prog.load().expect("load floor_drop");
    pod.run(|| drop_prog.attach("eth0", TcAttachType::Ingress))
        .expect("attach floor_drop");
    let pad = [0u8; 22]; // 64-byte frames.
    let to = |n: usize| {
        let mac = juneau::parse_mac(&node_mac(n)).unwrap();
        frames::udp((ROUTER_MAC, OUTSIDE), (mac, EIP), &pad)
    };
    let paths: [(&str, Vec<u8>); 2] = [("carried", to(1)), ("direct", to(0))];
    let fwd_before: Vec<u64> = c.nodes.iter().map(|n| forwarded(&n.ns)).collect();
    let mut r: [Vec<f64>; 2] = Default::default();
    for round in 0..rounds {
        for i in (0..paths.len()).map(|j| (j + round) % paths.len()) {
            r[i].push(generator.blast_fresh(&upstream, "eth0", pod, &paths[i].1, count) * 1e6);
        }
    }
    let m = r.map(|mut v| median(&mut v));
    for (n, node) in c.nodes.iter().enumerate() {
        assert_eq!(
            forwarded(&node.ns) - fwd_before[n],
            0,
            "node{n}'s kernel forwarded frames"
        );
        let drops = node.dropped();
        assert!(drops.is_empty(), "node{n}'s datapath dropped: {drops:?}");
    }
    println!(
        "eip bgp pps, two Nodes, median of {rounds} rotated rounds of {count}: carried {:.0}, direct {:.0} ({:.2}x)",
        m[0],
        m[1],
        m[0] / m[1]
    );
    write_part(
        "eip_bgp_pps",
        &[Measurement::new(
            "pps_eip_bgp_carried_vs_direct",
            "Mpps",
            m[0] / 1e6,
            ("landing_on_the_holder", m[1] / 1e6),
            &format!(
                "no goal: what landing on a Node that does not hold the ElasticIP costs; frames from the upstream on the underlay bridge to 203.0.113.10 held by a Pod on node0, sent to node1's uplink MAC (eip_uplink -> VXLAN, VNI = networkID -> node1's uplink -> the bridge again -> node0's underlay_ingress decapsulates -> the Pod) vs to node0's (eip_uplink -> bpf_redirect_peer into the Pod); neither Node's kernel forwarded any, neither datapath dropped any; 64-byte IPv4/UDP frames written afresh by an XDP live-frames generator in the upstream (one CPU), counted at the Pod's eth0 rx and dropped there; median of {rounds} rounds of {count}, the paths interleaved"
            ),
        )],
    );
    drop(floor);
}
