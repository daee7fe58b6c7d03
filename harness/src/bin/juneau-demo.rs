//! The README's demo: one Node, three Pods on one L2Network segment, switched by
//! Juneau's eBPF datapath. Shows frames flooded and switched, a real ping across the
//! segment, and the table the datapath learned by itself.
use std::time::Duration;

use juneau_harness::{
    Capture, Node,
    capture::inject,
    decode,
    frames::{self, fixtures::*},
    scenario,
};

const VNI: u32 = 100;

fn mac(m: &[u8; 6]) -> String {
    juneau::format_mac(m)
}

/// Scenarios the demo runs after the one-Node part: the overlay across Nodes.
const SCENARIOS: [&str; 2] = [
    "scenarios/three-node-broadcast.yaml",
    "scenarios/cross-node-dhcp.yaml",
];

fn run_scenarios(files: &[String]) -> bool {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut ok = true;
    for f in files {
        println!();
        let path = root.join(f);
        match scenario::run(&path, &mut |line| println!("{line}")) {
            Ok(()) => println!("  => holds"),
            Err(e) => {
                println!("  => FAILED: {e}");
                ok = false;
            }
        }
    }
    ok
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--scenario") {
        let files: Vec<String> = args[i + 1..].to_vec();
        if files.is_empty() {
            eprintln!("usage: juneau-demo [--scenario FILE...]");
            std::process::exit(2);
        }
        std::process::exit(if run_scenarios(&files) { 0 } else { 1 });
    }
    println!("== Juneau demo: one Node, three Pods on L2Network VNI {VNI}\n");
    let mut node = Node::new();
    for i in 0..3 {
        node.add_pod(i, VNI);
    }
    println!("Node namespace {}", node.ns.name());
    for (i, p) in node.pods.iter().enumerate() {
        println!(
            "  pod{i}: netns {} eth0 {} <-> host veth {} (ifindex {}), port_ingress attached (TCX)",
            p.ns.name(),
            mac(&p.mac),
            p.host_ifname,
            p.host_ifindex
        );
    }
    let caps: Vec<_> = node
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| Capture::start(&p.ns, &p.ifname, &format!("pod{i}")))
        .collect();
    let show = |what: &str| {
        println!("\n-- {what}");
        for c in &caps {
            let got = c.received(Duration::from_millis(150));
            match got.first() {
                None => println!("  {}: nothing", c.name),
                Some(f) => {
                    let layers = decode::layers(f);
                    let top = layers
                        .iter()
                        .rev()
                        .find(|l| !l.starts_with("bytes"))
                        .cloned();
                    println!(
                        "  {}: {} frame(s): {}",
                        c.name,
                        got.len(),
                        top.unwrap_or_default()
                    );
                }
            }
        }
    };

    inject(
        &node.pods[0].ns,
        "eth0",
        &frames::arp_request(pod_mac(0), pod_ip(0), pod_ip(1)),
    );
    show("pod0 broadcasts an ARP request: flooded to every other Pod, never back to pod0");
    inject(
        &node.pods[1].ns,
        "eth0",
        &frames::arp_reply(pod_mac(1), pod_ip(1), pod_mac(0), pod_ip(0)),
    );
    show("pod1 answers: known unicast, only pod0 receives it (bpf_redirect_peer)");
    inject(
        &node.pods[0].ns,
        "eth0",
        &frames::raw(frames::BROADCAST, pod_mac(0), 0x88b5, b"any ethertype"),
    );
    show("pod0 sends EtherType 0x88b5: L2 only, passed untouched");

    // A real ping between two Pods, addresses assigned inside them.
    for i in 0..2u8 {
        let ip = pod_ip(i);
        node.pods[i as usize].ns.ip(&[
            "addr",
            "add",
            &format!("{}.{}.{}.{}/24", ip[0], ip[1], ip[2], ip[3]),
            "dev",
            "eth0",
        ]);
    }
    let ping = node.pods[0]
        .ns
        .try_exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.1.11"]);
    println!("\n-- real ping pod0 -> pod1 (10.0.1.11) across the segment");
    match &ping {
        Ok(out) => out
            .lines()
            .filter(|l| l.contains("transmitted") || l.contains("rtt"))
            .for_each(|l| println!("  {l}")),
        Err(e) => println!("  FAILED: {e}"),
    }
    for c in &caps {
        c.received(Duration::from_millis(50));
    }

    println!("\n-- learned table of VNI {VNI} (written by the datapath alone, L2-29)");
    println!("  {:<18} {:>8} {:>6}", "MAC", "IFINDEX", "VTEP");
    let mut fdb = node.dataplane.fdb(VNI).expect("read fdb");
    fdb.sort_by_key(|(k, _)| k.mac);
    for (k, e) in &fdb {
        println!("  {:<18} {:>8} {:>6}", mac(&k.mac), e.ifindex, e.vtep);
    }
    println!("\n-- drop counters");
    for (reason, n) in node.dataplane.drops().expect("read drops") {
        if n > 0 {
            println!("  {reason}: {n}");
        }
    }
    let learned = |m: [u8; 6]| fdb.iter().any(|(k, _)| k.mac == m);
    let mut ok = ping.is_ok() && learned(pod_mac(0)) && learned(pod_mac(1));
    drop(caps);
    drop(node);
    println!("\n== Across Nodes: VXLAN overlay between Node namespaces on an underlay bridge");
    ok &= run_scenarios(&SCENARIOS.map(String::from));
    println!("\n{}", if ok { "demo: OK" } else { "demo: FAILED" });
    std::process::exit(if ok { 0 } else { 1 });
}
