//! Packet rate through NetworkACL and SecurityGroups on one Node, against Linux
//! netfilter judging the same rules, live frames side by side in one run (median of
//! interleaved rounds; the generator and the counting are `bench::LiveFrames`'s):
//!
//! - `pps_policy_vs_netfilter`: 64-byte IPv4/UDP frames of one established connection
//!   from a Subnet A Pod to a Subnet B Pod, routed by Juneau (`port_ingress` ->
//!   `gw_route` -> `gw_forward` -> delivery -> `deliver_svc`), A's segment naming a
//!   NetworkACL of 64 rules a direction and the receiving NIC carrying 2 SecurityGroups
//!   of 64 rules each (`policy_tables`). Baseline: the same two Pods on plain veths,
//!   routed by the Node namespace's kernel (`ip_forward`, permanent neighbours) through
//!   the same rules as nftables on the forward hook, stateful (`ct state established`
//!   first, as Juneau's connection table is first). On both beds the connection is
//!   opened by one frame each way before the rounds, so every measured frame takes the
//!   established path: checked by the ACL's counters (judged once) and by the nftables
//!   rule's counter.
//! - `pps_policy_vs_no_policy`: the same Juneau bed without ACL and groups.
//! - `pps_policy_vs_bare_redirect_peer`: the ceiling of the path here, one bare
//!   `bpf_redirect_peer` from the sender's veth into the receiver.
use std::net::Ipv4Addr;

use juneau_harness::{
    Netns, Node,
    bench::{
        LiveFrames, Measurement, gro_on, median, nft_load, plain_pods, redirect_peer_bed,
        write_part,
    },
    capture::inject,
    frames::{self, BROADCAST, fixtures::pod_mac},
    node::PodOptions,
    policy_tables::{Flow, Tables},
    router,
    two_subnets::*,
};

const ACL_ID: u32 = 7;
const SGS: [u16; 2] = [11, 12];
const SPORT: u16 = 40_000;
const DPORT: u16 = 5201;
const ROUNDS: usize = 5;
const FRAMES: u32 = 1_000_000;
const TABLE: &str = "jnbench";

fn flow() -> Flow {
    Flow {
        proto: "udp",
        to: ip(2).into(),
        port: DPORT,
    }
}

/// The connection's frame from A to B (to `mac`, A's next hop), 64 bytes.
fn a_to_b(mac: [u8; 6]) -> Vec<u8> {
    frames::udp_ports((pod_mac(0), ip(0), SPORT), (mac, ip(2), DPORT), &[0; 22])
}

/// Its reply from B (pod MAC `from`) to A by `mac`.
fn b_to_a(from: [u8; 6], mac: [u8; 6]) -> Vec<u8> {
    frames::udp_ports((from, ip(2), DPORT), (mac, ip(0), SPORT), &[0; 22])
}

/// Pods 0 (A) and 2 (B) on one Node routed by Juneau; with `policy`, the ACL on A and
/// both groups on pod 2's NIC.
fn juneau_bed(policy: bool) -> (Netns, Netns, Node) {
    let mut node = Node::new();
    let here = Ipv4Addr::UNSPECIFIED;
    let mut state = router::state(
        &[SEG_A, SEG_B],
        &[
            (VNI_A, ip(0), pod_mac(0), here),
            (VNI_B, ip(2), pod_mac(2), here),
        ],
    );
    if policy {
        state.segments.get_mut(&VNI_A).unwrap().acl = ACL_ID;
    }
    node.dataplane.sync_router(&state).unwrap();
    node.add_pod_with(0, PodOptions::vni(VNI_A));
    let mut b = PodOptions::vni(VNI_B);
    b.security_groups = policy;
    node.add_pod_with(2, b);
    if policy {
        let want = Tables::new(64, flow(), false).state(1, ACL_ID, SGS, (VNI_B, ip(2).into()));
        node.dataplane.policy.sync(&want).unwrap();
    }
    gro_on(&node.ns, "jp0");
    gro_on(&node.ns, "jp2");
    // The switch learns both Pods, then the connection is opened both ways.
    for (pod, i) in [(0, 0u8), (1, 2)] {
        let learn = frames::raw(BROADCAST, pod_mac(i), 0x88b5, b"hi");
        inject(&node.pods[pod].ns, "eth0", &learn);
    }
    inject(&node.pods[0].ns, "eth0", &a_to_b(GW_A));
    inject(&node.pods[1].ns, "eth0", &b_to_a(pod_mac(2), GW_B));
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut pods: Vec<_> = node.pods.drain(..).collect();
    let b = pods.pop().unwrap();
    let a = pods.pop().unwrap();
    (a.ns, b.ns, node)
}

fn mac_of(ns: &Netns, dev: &str) -> [u8; 6] {
    let s = ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")]);
    juneau::parse_mac(s.trim()).expect("a MAC")
}

/// The same two Pods routed by their Node namespace's kernel through the same rules as
/// nftables; returns the MAC the sender sends to (h0's).
fn netfilter_bed() -> (Netns, Netns, Netns, [u8; 6]) {
    let (node, mut pods) = plain_pods(2);
    let b = pods.pop().unwrap();
    let a = pods.pop().unwrap();
    node.ip(&["addr", "add", "10.0.1.1/24", "dev", "h0"]);
    node.ip(&["addr", "add", "10.0.2.1/24", "dev", "h1"]);
    node.sysctl("net.ipv4.ip_forward", "1");
    for (addr, mac, dev) in [(ip(2), pod_mac(1), "h1"), (ip(0), pod_mac(0), "h0")] {
        let (addr, mac) = (Ipv4Addr::from(addr).to_string(), juneau::format_mac(&mac));
        node.ip(&[
            "neigh",
            "replace",
            &addr,
            "lladdr",
            &mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ]);
    }
    let rules = Tables::new(64, flow(), false).nft(TABLE, SEG_A.cidr, ip(2).into());
    nft_load(&node, &rules);
    gro_on(&node, "h0");
    gro_on(&node, "h1");
    let (h0, h1) = (mac_of(&node, "h0"), mac_of(&node, "h1"));
    inject(&a, "eth0", &a_to_b(h0));
    inject(&b, "eth0", &b_to_a(pod_mac(1), h1));
    std::thread::sleep(std::time::Duration::from_millis(100));
    (a, b, node, h0)
}

/// Packets counted by the forward chain's `ct state established` rule.
fn established(node: &Netns) -> u64 {
    let chain = node.exec(&["nft", "list", "chain", "ip", TABLE, "forward"]);
    let line = chain
        .lines()
        .find(|l| l.contains("ct state established"))
        .expect("the established rule");
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "packets")
        .expect("its counter");
    words[at + 1].parse().expect("a count")
}

fn main() {
    let mut generator = LiveFrames::load();
    let (pa, pb, pnode) = juneau_bed(true);
    let (na, nb, _nnode) = juneau_bed(false);
    let (ka, kb, knode, h0) = netfilter_bed();
    let (ca, cb, _ckeep) = redirect_peer_bed();
    // The receivers drop at eth0's ingress, after its rx counter (a Pod's own IPv4
    // receive would cap every path and hide the difference).
    let mut sink = aya::EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    let drop_prog: &mut aya::programs::SchedClassifier = sink
        .program_mut("floor_drop")
        .expect("floor_drop")
        .try_into()
        .expect("a classifier");
    drop_prog.load().expect("load floor_drop");
    for b in [&pb, &nb, &kb, &cb] {
        b.run(|| drop_prog.attach("eth0", aya::programs::TcAttachType::Ingress))
            .expect("attach the sink");
    }
    let established_before = established(&knode);
    let to_juneau = a_to_b(GW_A);
    let to_kernel = a_to_b(h0);
    let (mut p, mut n, mut k, mut c) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        p.push(generator.blast_fresh(&pa, "eth0", &pb, &to_juneau, FRAMES));
        k.push(generator.blast_fresh(&ka, "eth0", &kb, &to_kernel, FRAMES));
        n.push(generator.blast_fresh(&na, "eth0", &nb, &to_juneau, FRAMES));
        c.push(generator.blast_fresh(&ca, "eth0", &cb, &to_kernel, FRAMES));
    }
    drop(sink);
    let sent = u64::from(FRAMES) * ROUNDS as u64;
    // Juneau judged the connection once: its first frame; every other took the entry.
    let [_, egress] = pnode.dataplane.policy.counters(ACL_ID).unwrap();
    assert_eq!(egress.allowed, 1, "the ACL judged only the first frame");
    let [g_in, _] = pnode.dataplane.policy.counters(u32::from(SGS[1])).unwrap();
    assert_eq!(g_in.allowed, 1, "the second group allowed the first frame");
    let drops = pnode.dataplane.drops().unwrap();
    let policy_drops: u64 = drops
        .iter()
        .filter(|(r, _)| r.starts_with("POLICY"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(policy_drops, 0, "no frame denied: {drops:?}");
    // Netfilter: every measured frame took the established rule.
    let took = established(&knode) - established_before;
    assert!(
        took >= sent * 9 / 10,
        "netfilter's established rule counted {took} of {sent}"
    );
    let (p, n, k, c) = (
        median(&mut p),
        median(&mut n),
        median(&mut k),
        median(&mut c),
    );
    println!(
        "policy pps: juneau with policy {p:.2} Mpps, without {n:.2}, nftables {k:.2}, bare redirect_peer {c:.2}"
    );
    let bed = "64-byte IPv4/UDP frames (written afresh by the generator, as the router rewrites them) of one connection from a Subnet A Pod to a Subnet B Pod on one Node, opened by one frame each way before the rounds; counted at the receiver's eth0 and dropped there; median of 5 interleaved rounds of 1,000,000";
    out_rows(p, n, k, c, bed);
}

fn out_rows(p: f64, n: f64, k: f64, c: f64, bed: &str) {
    let out = vec![
        Measurement::new(
            "pps_policy_vs_netfilter",
            "Mpps",
            p,
            ("nftables_forward_conntrack", k),
            &format!(
                "goal >= 2x; {bed}. Juneau: A's segment names a NetworkACL of 64 rules a direction and the receiving NIC carries 2 SecurityGroups of 64 rules each, the connection allowed by the last rule of the ACL's egress and of the second group (judged once, then its connection entry). Baseline: the same Pods on plain veths routed by the Node namespace's kernel (ip_forward, permanent neighbours) through the same rules as nftables on the forward hook (policy drop; ct state established,related accept first, then the ACL's chains and the groups' chain, 64 rules each, as Juneau orders them), every measured frame counted by the established rule"
            ),
        ),
        Measurement::new(
            "pps_policy_vs_no_policy",
            "Mpps",
            p,
            ("juneau_routed_no_policy", n),
            &format!("{bed}; the same Juneau bed without the ACL and groups"),
        ),
        Measurement::new(
            "pps_policy_vs_bare_redirect_peer",
            "Mpps",
            p,
            ("bare_bpf_redirect_peer", c),
            &format!(
                "the ceiling of the path here: the same frames through one bpf_redirect_peer from the sender's veth into the receiver, nothing looked up or rewritten; {bed}"
            ),
        ),
    ];
    write_part("policy_pps", &out);
}
