//! The Vpc router beside its baselines, in one run:
//! - program cost (BPF_PROG_TEST_RUN, single runs, interleaved, median of rounds): a
//!   routed frame (known neighbour on a local port of another segment) against an L2
//!   known-unicast frame through the same `port_ingress`;
//! - packet rate on one Node, 60-byte UDP frames routed from one segment's Pod to
//!   another's (delivered to the receiver's eth0, counted there), against the kernel's
//!   own router (`ip_forward` between two veths, static neighbour) on the same machine;
//! - TCP across two Nodes (iperf3, one stream), routed from one segment to another
//!   against the same two Pods on one segment, interleaved;
//! - the verifier's count of the router program.
use std::net::Ipv4Addr;

use juneau::features::router::gateway::RouterState;
use juneau::node::dataplane::{PortKind, PortSpec};
use juneau_harness::{
    Netns, Node,
    bench::{
        LiveFrames, Measurement, gro_on, iperf, median, plain_pods, redirect_peer_bed, write_part,
    },
    capture::inject,
    frames::{self, BROADCAST, fixtures::*},
    node::{Cluster, PodOptions, node_ip},
    router::{self, Seg},
    testrun::{PortBed, TC_ACT_REDIRECT, run_tc},
};

const VNI_A: u32 = 71;
const VNI_B: u32 = 72;
const GW_A: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 71];
const GW_B: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 72];
const B_IP: [u8; 4] = [10, 0, 2, 11];
const SINGLE: usize = 5_000;
const ROUNDS: usize = 5;
const FRAMES: u32 = 1_000_000;

fn segs() -> [Seg; 2] {
    let seg = |vni, cidr, gw, gw_mac| Seg {
        vni,
        cidr,
        gw,
        gw_mac,
        mtu: 1500,
    };
    [
        seg(VNI_A, "10.0.1.0/24", [10, 0, 1, 1], GW_A),
        seg(VNI_B, "10.0.2.0/24", [10, 0, 2, 1], GW_B),
    ]
}

/// A and B, the Pod on B a neighbour on this Node.
fn router() -> RouterState {
    router::state(&segs(), &[(VNI_B, B_IP, pod_mac(1), Ipv4Addr::UNSPECIFIED)])
}

/// ns per frame of the routed and the switched path, single runs interleaved.
fn program_cost(out: &mut Vec<Measurement>) {
    let bed = PortBed::new(3);
    let mut dp = juneau::node::dataplane::Whole::load(None).expect("load");
    dp.sync_router(&router()).unwrap();
    for (i, vni) in [(0, VNI_A), (1, VNI_B), (2, VNI_A)] {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i),
            vni,
            mtu: 1500,
            peer: true,
            security_groups: false,
            kind: PortKind::Switched,
        })
        .unwrap();
    }
    // Both receivers speak once: their MACs are known unicast.
    for i in [1usize, 2] {
        run_tc(
            &bed.ns,
            dp.l2_port_program(),
            bed.ifindex(i),
            &frames::raw(BROADCAST, pod_mac(i as u8), 0x88b5, b"hi"),
            1,
        );
    }
    let routed = frames::udp((pod_mac(0), pod_ip(0)), (GW_A, B_IP), &[0; 18]);
    let switched = frames::udp((pod_mac(0), pod_ip(0)), (pod_mac(2), pod_ip(2)), &[0; 18]);
    let mut r = Vec::new();
    let mut s = Vec::new();
    for _ in 0..ROUNDS {
        let mut rr = Vec::new();
        let mut ss = Vec::new();
        for _ in 0..SINGLE / ROUNDS {
            let a = run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(0), &routed, 1);
            assert_eq!(a.verdict, TC_ACT_REDIRECT, "routed");
            rr.push(a.per_run.as_nanos() as f64);
            let b = run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(0), &switched, 1);
            assert_eq!(b.verdict, TC_ACT_REDIRECT, "switched");
            ss.push(b.per_run.as_nanos() as f64);
        }
        r.push(median(&mut rr));
        s.push(median(&mut ss));
    }
    out.push(Measurement::new(
        "routed_vs_l2_known_unicast",
        "ns",
        median(&mut r),
        ("l2_known_unicast_single_run", median(&mut s)),
        "goal <= 3x; one IPv4/UDP frame through port_ingress: routed to a known neighbour on another segment's local port (tail call, LPM, neighbour, TTL, MAC rewrite) vs switched to a known MAC of its own segment; single runs (a repeated run would route its own output), median of 1,000 per round, median of 5 rounds",
    ));
    let insns = dp
        .program("gw_route")
        .info()
        .ok()
        .and_then(|i| i.verified_instruction_count())
        .unwrap_or(0) as f64;
    out.push(Measurement::new(
        "verifier_gw_route",
        "insns",
        insns,
        ("reference_l2_gateway", 132_527.0),
        "goal < 150,000; the router program entered by tail call (ARP, echo, routing, ICMP errors, delivery)",
    ));
}

/// Two Pods on two segments of one Node, routed by Juneau.
fn juneau_bed() -> (Netns, Netns, Box<dyn std::any::Any>) {
    let mut node = Node::new();
    node.dataplane.sync_router(&router()).unwrap();
    node.add_pod_with(0, PodOptions::vni(VNI_A));
    node.add_pod_with(1, PodOptions::vni(VNI_B));
    gro_on(&node.ns, "jp0");
    inject(
        &node.pods[1].ns,
        "eth0",
        &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hi"),
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut pods: Vec<_> = node.pods.drain(..).collect();
    let b = pods.pop().unwrap();
    let a = pods.pop().unwrap();
    (a.ns, b.ns, Box::new(node))
}

/// The same two Pods routed by the kernel of their Node namespace (`ip_forward`).
fn kernel_bed() -> (Netns, Netns, Box<dyn std::any::Any>, [u8; 6]) {
    let (node, mut pods) = plain_pods(2);
    let b = pods.pop().unwrap();
    let a = pods.pop().unwrap();
    node.ip(&["addr", "add", "10.0.1.1/24", "dev", "h0"]);
    node.ip(&["addr", "add", "10.0.2.1/24", "dev", "h1"]);
    node.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    let b_mac = juneau::format_mac(&pod_mac(1));
    node.ip(&[
        "neigh",
        "replace",
        "10.0.2.11",
        "lladdr",
        &b_mac,
        "dev",
        "h1",
        "nud",
        "permanent",
    ]);
    gro_on(&node, "h0");
    let h0_mac = node.exec(&["cat", "/sys/class/net/h0/address"]);
    let h0_mac = juneau::parse_mac(h0_mac.trim()).expect("h0's MAC");
    (a, b, Box::new(node), h0_mac)
}

fn packet_rate(out: &mut Vec<Measurement>) {
    let mut generator = LiveFrames::load();
    let (ja, jb, _jkeep) = juneau_bed();
    let (ka, kb, _kkeep, h0) = kernel_bed();
    let (pa, pb, _pkeep) = redirect_peer_bed();
    for (a, b) in [(&ja, &jb), (&ka, &kb), (&pa, &pb)] {
        a.ip(&["addr", "add", "10.0.1.10/24", "dev", "eth0"]);
        b.ip(&["addr", "add", "10.0.2.11/24", "dev", "eth0"]);
    }
    // Both receivers drop at eth0's ingress (after its rx counter): the IPv4 receive of
    // a Pod caps every path near 1.2 Mpps and would hide the router's cost.
    let mut sink = aya::EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    let drop_prog: &mut aya::programs::SchedClassifier = sink
        .program_mut("floor_drop")
        .expect("floor_drop")
        .try_into()
        .expect("a classifier");
    drop_prog.load().expect("load floor_drop");
    for b in [&jb, &kb, &pb] {
        b.run(|| drop_prog.attach("eth0", aya::programs::TcAttachType::Ingress))
            .expect("attach the sink");
    }
    let _sinks = sink;
    // 64-byte frames: the generator writes 64 bytes afresh into each (routers rewrite).
    let to_juneau = frames::udp((pod_mac(0), pod_ip(0)), (GW_A, B_IP), &[0; 22]);
    let to_kernel = frames::udp((pod_mac(0), pod_ip(0)), (h0, B_IP), &[0; 22]);
    let (mut j, mut k, mut p) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        j.push(generator.blast_fresh(&ja, "eth0", &jb, &to_juneau, FRAMES));
        k.push(generator.blast_fresh(&ka, "eth0", &kb, &to_kernel, FRAMES));
        p.push(generator.blast_fresh(&pa, "eth0", &pb, &to_kernel, FRAMES));
    }
    let p = median(&mut p);
    // Every frame was routed (none flooded or dropped by the datapath).
    if let Some(node) = _jkeep.downcast_ref::<Node>() {
        let routed = node.dataplane.gw_stats().unwrap()[0].1;
        assert_eq!(
            routed,
            u64::from(FRAMES) * ROUNDS as u64,
            "not every frame was routed"
        );
    }
    drop(_sinks);
    let (j, k) = (median(&mut j), median(&mut k));
    out.push(Measurement::new(
        "pps_routed_one_node_vs_redirect_peer",
        "Mpps",
        j,
        ("bare_bpf_redirect_peer", p),
        "the same routed frames against the ceiling of the path here: one bpf_redirect_peer from the sender's veth into the receiver, nothing looked up or rewritten",
    ));
    println!(
        "routed pps, one Node: juneau {j:.2} Mpps, ip_forward {k:.2} Mpps, bare redirect_peer {p:.2} Mpps"
    );
    out.push(Measurement::new(
        "pps_routed_one_node_vs_ip_forward",
        "Mpps",
        j,
        ("linux_ip_forward", k),
        "goal >= 1.6x; 64-byte IPv4/UDP frames (written afresh by the generator, as the router rewrites them) from a Pod of one segment to a Pod of another on the same Node, counted at the receiver's eth0 and dropped there; the baseline routes the same frames with the Node namespace's kernel (ip_forward, static neighbour, no netfilter rules); median of 5 interleaved rounds of 1,000,000",
    ));
}

/// Two Nodes, a Pod each: on one segment (`routed` false) or on two (`routed` true,
/// each Pod's default route via its gateway). Pod addresses 10.0.1.10 and 10.0.2.11
/// (routed) or 10.0.1.10 and 10.0.1.11.
fn tcp_bed(routed: bool) -> Cluster {
    let mut c = Cluster::new(2);
    let (b_ip, b_vni) = if routed {
        ([10, 0, 2, 11], VNI_B)
    } else {
        ([10, 0, 1, 11], VNI_A)
    };
    let want = router::state(
        &segs(),
        &[
            (VNI_A, pod_ip(0), pod_mac(0), node_ip(0)),
            (b_vni, b_ip, pod_mac(1), node_ip(1)),
        ],
    );
    let b_ip = Ipv4Addr::from(b_ip).to_string();
    for node in &mut c.nodes {
        node.dataplane.sync_router(&want).unwrap();
    }
    c.add_pod(0, 0, PodOptions::vni(VNI_A).mtu(1450));
    c.add_pod(1, 1, PodOptions::vni(b_vni).mtu(1450));
    let (a, b) = (&c.pod(0, 0).ns, &c.pod(1, 0).ns);
    a.ip(&["addr", "add", "10.0.1.10/24", "dev", "eth0"]);
    b.ip(&["addr", "add", &format!("{b_ip}/24"), "dev", "eth0"]);
    let gw_b = if routed { "10.0.2.1" } else { "10.0.1.1" };
    a.ip(&["route", "add", "default", "via", "10.0.1.1"]);
    b.ip(&["route", "add", "default", "via", gw_b]);
    c
}

fn tcp(out: &mut Vec<Measurement>) {
    let routed = tcp_bed(true);
    let switched = tcp_bed(false);
    let (mut r, mut s) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        r.push(iperf(&routed.pod(0, 0).ns, &routed.pod(1, 0).ns, "10.0.2.11", "3").0);
        s.push(
            iperf(
                &switched.pod(0, 0).ns,
                &switched.pod(1, 0).ns,
                "10.0.1.11",
                "3",
            )
            .0,
        );
    }
    out.push(Measurement::new(
        "tcp_routed_cross_node_vs_l2",
        "Gbit/s",
        median(&mut r),
        ("l2_cross_node", median(&mut s)),
        "goal >= 0.95x; iperf3 one stream 3 s between Pods on two Nodes (MTU 1450): routed from one segment to another (the sender's Node routes, the frame crosses with the destination's VNI) vs the same Pods on one segment; 5 interleaved runs each, medians",
    ));
}

fn main() {
    let mut out = Vec::new();
    if std::env::var("JN_GW_PPS_ONLY").is_err() {
        program_cost(&mut out);
    }
    packet_rate(&mut out);
    if std::env::var("JN_GW_PPS_ONLY").is_err() {
        tcp(&mut out);
    }
    for m in &out {
        println!("{m:?}");
    }
    write_part("gw", &out);
}
