//! 1:1 NAT of an ElasticIP attached to a Subnet NIC (NAT-03) on one Node, live frames
//! side by side in one run (median of rotated rounds; the generator and the counting
//! are `bench::LiveFrames`'s, as in `eip_pps` and `nat`):
//!
//! 1. `pps_eipa_vs_nft_dnat`: 64-byte IPv4/UDP frames of one connection from outside
//!    (198.51.100.10, sent by the upstream router's namespace) to the ElasticIP
//!    10.99.0.110, attached to a Subnet Pod's NIC (10.0.1.10): `underlay_ingress` on
//!    the Node's uplink -> tail call `eip_uplink` -> the destination rewritten to the
//!    Pod's address (its checksums in registers) -> one hop from the Subnet's gateway
//!    MAC -> `bpf_redirect_peer` into the Pod. Baseline: the same shape without
//!    Juneau, a plain veth Pod whose Node namespace's kernel translates with an
//!    nftables DNAT/SNAT pair (conntrack: the connection's entry found for every frame
//!    after the first) and forwards (`ip_forward`, the Pod's neighbour permanent).
//! 2. `pps_eipa_vs_bare_redirect_peer`: the ceiling of that path here, one bare
//!    `bpf_redirect_peer` (`floor_redirect_peer`) from the uplink's ingress into a
//!    plain Pod, nothing looked up or rewritten.
//!
//! The receivers drop every frame at their eth0's ingress after the rx counter
//! (`floor_drop`): the Pod's own IP stack would cap every path and hide the difference.
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::programs::{SchedClassifier, TcAttachType};
use juneau::node::dataplane::Holder;
use juneau_harness::{
    Netns, Node,
    bench::{
        LiveFrames, Measurement, forwarded, gro_on, median, nft_counted, nft_load, plain_pods,
        write_part,
    },
    capture::inject,
    frames::{self, fixtures::pod_mac},
    node::PodOptions,
    router::{self, Seg},
    uplink::{self, ROUTER_MAC, UPLINK_MAC, if_index, ip, mac_of, uplink},
};

const VNI: u32 = 6301;
const SEG: Seg = Seg {
    vni: VNI,
    cidr: "10.0.1.0/24",
    gw: [10, 0, 1, 1],
    gw_mac: [0x02, 0x4a, 0x4e, 0, 0x18, 0x99],
    mtu: 1500,
};
const POD: [u8; 4] = [10, 0, 1, 10];
const EIP: [u8; 4] = [10, 99, 0, 110];
const OUTSIDE: [u8; 4] = [198, 51, 100, 10];
const TABLE: &str = "jnbencheipa";

/// A Node brought up by the daemon's own code on `ul0`, with one Subnet Pod whose NIC
/// has the ElasticIP attached. Returns it and its upstream.
fn juneau_node() -> (Node, Netns) {
    let (mut node, upstream) = uplink::juneau_node();
    let vtep = node.ip.expect("the Node's address");
    node.dataplane
        .sync_router(&router::state(&[SEG], &[(VNI, POD, pod_mac(0), vtep)]))
        .unwrap();
    node.add_pod_with(0, PodOptions::vni(VNI).subnet(POD));
    let holder = Holder {
        mac: pod_mac(0),
        vni: VNI,
        node: vtep,
        pod_ip: Some(POD.into()),
    };
    node.dataplane
        .set_elastic_ips(&BTreeMap::from([(Ipv4Addr::from(EIP), holder)]))
        .unwrap();
    gro_on(&node.ns, "ul0");
    (node, upstream)
}

/// The same shape without Juneau: a plain veth Pod (`h0`, its gateway 10.0.1.1 on the
/// Node, its neighbour entry permanent), the Node namespace's kernel translating the
/// ElasticIP to the Pod and back by an nftables DNAT/SNAT pair (conntrack) and
/// forwarding. Returns (Node, Pod, upstream).
fn dnat_bed() -> (Netns, Netns, Netns) {
    let (node, mut pods) = plain_pods(1);
    let upstream = uplink(&node);
    let pod = pods.pop().unwrap();
    ip(&node, "addr add 10.0.1.1/24 dev h0");
    let pod_mac = juneau::format_mac(&mac_of(&pod, "eth0"));
    ip(
        &node,
        &format!("neigh replace 10.0.1.10 lladdr {pod_mac} dev h0 nud permanent"),
    );
    ip(&pod, "addr add 10.0.1.10/24 dev eth0");
    let rules = format!(
        "table ip {TABLE} {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat; policy accept;\n    ip daddr 10.99.0.110 counter dnat to 10.0.1.10\n  }}\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    ip saddr 10.0.1.10 oifname \"ul0\" snat to 10.99.0.110\n  }}\n}}\n"
    );
    nft_load(&node, &rules);
    gro_on(&node, "ul0");
    (node, pod, upstream)
}

/// Frames the DNAT rule translated (one per new connection).
fn dnatted(node: &Netns) -> u64 {
    nft_counted(node, TABLE, "prerouting")
}

fn main() {
    let quick = std::env::var_os("JUNEAU_BENCH_QUICK").is_some();
    let (count, rounds): (u32, usize) = if quick { (200_000, 3) } else { (1_000_000, 7) };
    let mut generator = LiveFrames::load();
    let (node, upstream) = juneau_node();
    let (k_node, k_pod, k_upstream) = dnat_bed();
    let (c_node, mut c_pods) = plain_pods(1);
    let c_upstream = uplink(&c_node);
    let c_pod = c_pods.pop().unwrap();
    gro_on(&c_node, "ul0");
    let pod = &node.pods[0].ns;
    // The floor object: every receiver drops at its eth0's ingress (after the rx
    // counter); the ceiling bed's uplink hands every frame to its Pod by one bare
    // bpf_redirect_peer.
    let mut floor = aya::EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    let fwd = c_node.run(|| (if_index("ul0"), if_index("h0")));
    aya::maps::HashMap::<_, u32, u32>::try_from(floor.map_mut("jn_floor_fwd").unwrap())
        .unwrap()
        .insert(fwd.0, fwd.1, 0)
        .unwrap();
    for (name, at, dev) in [
        ("floor_drop", vec![pod, &k_pod, &c_pod], "eth0"),
        ("floor_redirect_peer", vec![&c_node], "ul0"),
    ] {
        let prog: &mut SchedClassifier = floor.program_mut(name).unwrap().try_into().unwrap();
        prog.load().unwrap_or_else(|e| panic!("load {name}: {e}"));
        for ns in at {
            ns.run(|| prog.attach(dev, TcAttachType::Ingress))
                .unwrap_or_else(|e| panic!("attach {name}: {e}"));
        }
    }
    let pad = [0u8; 22]; // 64-byte frames: the generator writes 64 bytes afresh.
    let to_eip = frames::udp((ROUTER_MAC, OUTSIDE), (UPLINK_MAC, EIP), &pad);
    let to_pod = frames::udp((ROUTER_MAC, OUTSIDE), (pod_mac(0), POD), &pad);
    let paths: [(&str, &Netns, &Netns, &[u8]); 3] = [
        ("juneau 1:1", &upstream, pod, &to_eip),
        ("nftables dnat", &k_upstream, &k_pod, &to_eip),
        ("bare bpf_redirect_peer", &c_upstream, &c_pod, &to_pod),
    ];
    let mut blast = |i: usize| {
        let (_, tx, rx, frame) = paths[i];
        generator.blast_fresh(tx, "eth0", rx, frame, count) * 1e6
    };
    // The baseline's connection is opened (translated once) before the rounds: the
    // first frames of a blast would each meet an unconfirmed conntrack entry and the
    // DNAT rule again (a clash), which is not the steady state measured.
    inject(&k_upstream, "eth0", &to_eip);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        dnatted(&k_node),
        1,
        "the baseline's connection, translated once"
    );
    let (fwd_j, fwd_k) = (forwarded(&node.ns), forwarded(&k_node));
    let mut r: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        // Each round starts with another path: no path always runs first.
        for i in (0..paths.len()).map(|j| (j + round) % paths.len()) {
            r[i].push(blast(i));
        }
    }
    let m = r.map(|mut v| median(&mut v));
    // Each path is the one claimed: the Juneau Node's kernel forwarded none of its
    // frames; the baseline's forwarded them, its DNAT rule seeing none (conntrack
    // took them).
    let (fwd_j, fwd_k) = (forwarded(&node.ns) - fwd_j, forwarded(&k_node) - fwd_k);
    assert_eq!(fwd_j, 0, "the Juneau Node's kernel forwarded frames");
    assert!(fwd_k > 0, "the baseline's kernel forwarded nothing");
    assert_eq!(
        dnatted(&k_node),
        1,
        "the DNAT rule ran again during the rounds"
    );
    let drops = node.dropped();
    assert!(drops.is_empty(), "the datapath dropped frames: {drops:?}");
    println!(
        "eipa pps, one Node, median of {rounds} rotated rounds of {count}: {:?}",
        paths
            .iter()
            .map(|p| p.0)
            .zip(m.map(|v| v.round()))
            .collect::<Vec<_>>()
    );
    let how = format!(
        "64-byte IPv4/UDP frames of one connection written afresh by an XDP live-frames generator in the upstream router's namespace (one CPU), counted at the Pod's eth0 rx and dropped there; median of {rounds} rounds of {count}, the paths interleaved"
    );
    write_part(
        "eipa",
        &[
            Measurement::new(
                "pps_eipa_vs_nft_dnat",
                "Mpps",
                m[0] / 1e6,
                ("nftables_dnat_conntrack", m[1] / 1e6),
                &format!(
                    "goal >= 1.5x (NAT-03); from outside to an ElasticIP attached to a Subnet NIC: underlay_ingress -> eip_uplink (the destination rewritten to the Pod's address, one hop from the Subnet's gateway MAC) -> bpf_redirect_peer into the Pod (the Node's kernel forwarded none); baseline: a plain veth Pod, the same frames translated by an nftables DNAT/SNAT pair with conntrack in the Node namespace and forwarded by its kernel; {how}"
                ),
            ),
            Measurement::new(
                "pps_eipa_vs_bare_redirect_peer",
                "Mpps",
                m[0] / 1e6,
                ("bare_bpf_redirect_peer", m[2] / 1e6),
                &format!(
                    "the ceiling of the same path here: one bpf_redirect_peer by ingress ifindex from the Node's uplink into a plain Pod (floor_redirect_peer), nothing looked up or rewritten; that ceiling is {:.2}x the nftables baseline; {how}",
                    m[2] / m[1]
                ),
            ),
        ],
    );
    drop(floor);
}
