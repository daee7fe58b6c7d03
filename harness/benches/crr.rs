//! The cost of a new connection (issue 42), on the standalone stack: three real
//! `juneau node` daemons, the controller in process, Pods in their own namespaces.
//! Every loop is connect, then close by RST (no TIME_WAIT), one client at a time:
//! - `tcp_crr_clusterip_vs_direct`: a default-Vpc Pod on Node A to a ClusterIP whose
//!   three backends are on Nodes A, B and C, against the same backends by their own
//!   addresses (taken in turn);
//! - `tcp_crr_policy_vs_no_policy`: a Subnet Pod on A whose Subnet names a NetworkACL
//!   of 64 rules a direction, to a Pod on B with 2 SecurityGroups of 64 ingress entries
//!   each (allowed by the last rule of each), against the same pair of Subnets and
//!   Nodes with neither;
//! - `tcp_crr_clusterip_vs_kube_proxy`: a client and a Service's 3 backends on one
//!   Node, Juneau's ClusterIP against kube-proxy's (nftables mode, built from the
//!   Kubernetes tree in `tools/k8s`, against a real kube-apiserver; `crr/kube_proxy.rs`)
//!   on the same shape;
//! - `tcp_crr_clusterip_local_vs_bare_redirect`: that ClusterIP against the ceiling of
//!   any connection between two Pods of one Node here, a bare `bpf_redirect_peer` each
//!   way;
//! - `tcp_crr_clusterip_1000_services_vs_1`: the first row's ClusterIP again once
//!   1,000 Services are programmed, against its rate with the one;
//! - then, per connection of each kind, what it costs the datapath: the runs and the
//!   run time of every program (the kernel's BPF statistics, on only for that phase),
//!   the connection-table entries it leaves; and the daemons' CPU time over the
//!   rounds, per Juneau connection made (the sweep's share).
#[path = "../../tests/common/control_plane.rs"]
mod control_plane;
#[path = "crr/kube_proxy.rs"]
mod kube_proxy;
#[path = "crr/measure.rs"]
mod measure;
use measure::*;
#[path = "../../tests/common/relay.rs"]
mod relay;

use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    sync::{Arc, atomic::AtomicBool},
    time::Instant,
};

use juneau::{
    cli::{Filter, dump_conntrack, dump_services, node_dir},
    scenario::Layer,
    standalone::{Options, PodDef, Run, Scenario},
};
use juneau_harness::{
    bench::{Measurement, median, redirect_peer_pair, write_part},
    crr,
};
use serde_json::{Value, json};

const NODES: [&str; 3] = ["cr-a", "cr-b", "cr-c"];
const CLUSTER_IP: &str = "10.96.7.1";
/// A Service whose 3 backends are on the client's Node (the kube-proxy row's shape).
const LOCAL_IP: &str = "10.96.7.2";
const SERVER_PORT: u16 = 8080;
/// Connections per kind in the breakdown phase (each phase's source ports its own,
/// from 61,000 up: 4 phases fit below 65,535).
const BREAKDOWN: u64 = 1_000;

fn pod(name: &str, node: &str, annotations: &[(&str, &str)], app: Option<&str>) -> PodDef {
    PodDef {
        name: name.into(),
        namespace: "default".into(),
        node: node.into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (format!("juneau.loutres.me/{k}"), v.to_string()))
            .collect(),
        labels: app
            .map(|a| [("app".to_owned(), a.to_owned())].into())
            .unwrap_or_default(),
        ports: Default::default(),
        segment: None,
        addresses: Vec::new(),
        bridge_hosts: Vec::new(),
    }
}

/// 63 rules that match nothing here, then `last`: the connection is allowed by the
/// 64th, so a lookup that walked rules would pay for all of them.
fn rules(last: Value, with_from: bool) -> Vec<Value> {
    let mut v: Vec<Value> = (0..63u32)
        .map(|i| {
            let cidr = format!("10.95.{i}.0/24");
            let mut r = json!({"protocol": "tcp", "ports": [{"port": 1000 + i}]});
            if with_from {
                r["from"] = json!([{"cidr": cidr}]);
            } else {
                r["cidr"] = json!(cidr);
                r["priority"] = json!(10 + i);
                r["action"] = json!("allow");
            }
            r
        })
        .collect();
    v.push(last);
    v
}

fn objects() -> Vec<Value> {
    let k = |kind: &str, name: &str, spec: Value| {
        json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": kind,
            "metadata": {"name": name}, "spec": spec})
    };
    let last_acl = |cidr: &str| {
        json!({"priority": 900, "action": "allow", "protocol": "tcp", "cidr": cidr,
            "ports": [{"port": SERVER_PORT}]})
    };
    vec![
        k("Vpc", "crr-pol", json!({})),
        k(
            "NetworkACL",
            "crr-acl",
            json!({"vpc": "crr-pol",
                "egress": rules(last_acl("10.93.3.0/24"), false),
                "ingress": rules(last_acl("10.93.3.0/24"), false)}),
        ),
        k(
            "SecurityGroup",
            "crr-sg-a",
            json!({"vpc": "crr-pol", "ingress": rules(
                json!({"from": [{"cidr": "10.95.250.0/24"}], "protocol": "tcp", "ports": [{"port": 999}]}),
                true)}),
        ),
        k(
            "SecurityGroup",
            "crr-sg-b",
            json!({"vpc": "crr-pol", "ingress": rules(
                json!({"from": [{"cidr": "10.93.1.0/24"}], "protocol": "tcp", "ports": [{"port": SERVER_PORT}]}),
                true)}),
        ),
        k(
            "Subnet",
            "pcli",
            json!({"vpc": "crr-pol", "cidr": "10.93.1.0/24", "networkACL": "crr-acl"}),
        ),
        k(
            "Subnet",
            "qcli",
            json!({"vpc": "crr-pol", "cidr": "10.93.2.0/24"}),
        ),
        k(
            "Subnet",
            "psrv",
            json!({"vpc": "crr-pol", "cidr": "10.93.3.0/24"}),
        ),
        k(
            "Subnet",
            "qsrv",
            json!({"vpc": "crr-pol", "cidr": "10.93.4.0/24"}),
        ),
    ]
}

fn address(run: &Run, name: &str) -> Ipv4Addr {
    let nic = run.store.interfaces_of("default", name);
    nic[0].ip().expect("an attached NIC")
}

fn ns(run: &Run, name: &str) -> PathBuf {
    run.pod(name)
        .expect("a Pod of the run")
        .ns
        .path()
        .to_owned()
}

fn service(name: &str, ip: &str, app: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": ip, "selector": {"app": app},
                 "ports": [{"port": 80, "targetPort": SERVER_PORT}]},
    })
}

fn main() {
    let quick = std::env::var_os("JUNEAU_BENCH_QUICK").is_some();
    let (rounds, secs) = if quick { (3, 1.0) } else { (5, 1.5) };
    let scenario = Scenario {
        description: "the cost of a new connection".into(),
        layer: Layer::Stack,
        proves: vec!["SVC-01".into(), "POL-01".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: NODES.iter().map(|n| n.to_string()).collect(),
        objects: objects(),
        pods: Vec::new(),
        outside: juneau::scenario::Outside::None,
    };
    let mut run = Run::start(&scenario, &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&pod("c0", NODES[0], &[], None)).unwrap();
    for (i, node) in NODES.iter().enumerate() {
        run.add_pod(&pod(&format!("b{i}"), node, &[], Some("crr")))
            .unwrap();
    }
    run.add_pod(&pod("pc", NODES[0], &[("subnet", "pcli")], None))
        .unwrap();
    run.add_pod(&pod(
        "ps",
        NODES[1],
        &[
            ("subnet", "psrv"),
            ("security-groups", "crr-sg-a, crr-sg-b"),
        ],
        None,
    ))
    .unwrap();
    run.add_pod(&pod("qc", NODES[0], &[("subnet", "qcli")], None))
        .unwrap();
    run.add_pod(&pod("qs", NODES[1], &[("subnet", "qsrv")], None))
        .unwrap();
    for i in 0..3 {
        run.add_pod(&pod(&format!("l{i}"), NODES[0], &[], Some("crr-local")))
            .unwrap();
    }
    for (name, ip, app) in [
        ("crr", CLUSTER_IP, "crr"),
        ("crr-local", LOCAL_IP, "crr-local"),
    ] {
        run.store.create_service(service(name, ip, app)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut servers: Vec<_> = ["b0", "b1", "b2", "ps", "qs", "l0", "l1", "l2"]
        .iter()
        .map(|p| {
            crr::server(
                &ns(&run, p),
                Ipv4Addr::UNSPECIFIED,
                SERVER_PORT,
                stop.clone(),
            )
        })
        .collect();
    let kp = kube_proxy::start(80, SERVER_PORT);
    servers.extend(
        kp.backends()
            .map(|b| crr::server(b, Ipv4Addr::UNSPECIFIED, SERVER_PORT, stop.clone())),
    );
    // The ceiling: two plain Pods of one Node joined by a bare `bpf_redirect_peer` each
    // way, nothing looked up, translated or tracked.
    let (wire_a, wire_b, _wire) = redirect_peer_pair();
    wire_a.ip(&["addr", "add", "10.77.0.1/24", "dev", "eth0"]);
    wire_b.ip(&["addr", "add", "10.77.0.2/24", "dev", "eth0"]);
    servers.push(crr::server(
        wire_b.path(),
        Ipv4Addr::UNSPECIFIED,
        SERVER_PORT,
        stop.clone(),
    ));
    let at = |p: &str| SocketAddr::from((address(&run, p), SERVER_PORT));
    let cluster_ip = vec![SocketAddr::from((
        CLUSTER_IP.parse::<Ipv4Addr>().unwrap(),
        80,
    ))];
    let direct: Vec<SocketAddr> = ["b0", "b1", "b2"].iter().map(|p| at(p)).collect();
    let (policy, plain) = (vec![at("ps")], vec![at("qs")]);
    let local = vec![SocketAddr::from((
        LOCAL_IP.parse::<Ipv4Addr>().unwrap(),
        80,
    ))];
    let (kp_ip, kp_direct) = (
        vec![SocketAddr::from((kube_proxy::CLUSTER_IP, 80))],
        kp.direct(SERVER_PORT),
    );
    let (c0, pc, qc) = (ns(&run, "c0"), ns(&run, "pc"), ns(&run, "qc"));
    let kc = kp.client().to_owned();
    let (wa, wire) = (
        wire_a.path().to_owned(),
        vec![SocketAddr::from(([10, 77, 0, 2], SERVER_PORT))],
    );
    let beds: [(&PathBuf, &[SocketAddr]); 8] = [
        (&c0, &cluster_ip),
        (&c0, &direct),
        (&pc, &policy),
        (&qc, &plain),
        (&c0, &local),
        (&kc, &kp_ip),
        (&kc, &kp_direct),
        (&wa, &wire),
    ];
    // Until the Services reached the client's Node and every path answers.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    for (client, to) in beds {
        while crr::client_n(client, to, 3) != 0 {
            assert!(
                Instant::now() < deadline,
                "no connection to {to:?}; kube-proxy:\n{}",
                kp.log_tail()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // The daemons' CPU over the rounds, each connection's share: the sweep that
    // collects every connection's entries is most of what they do meanwhile.
    let cpu = daemons_cpu_ns(&run);
    let (rates, failed) = rounds_of(&beds, rounds, secs);
    let made: f64 = rates[..5].iter().flatten().map(|r| r * secs).sum();
    let daemons_ns = daemons_cpu_ns(&run).saturating_sub(cpu) as f64 / made;
    println!("crr rates {rates:?}, failed {failed:?}");
    let m: Vec<f64> = rates.iter().map(|v| median(&mut v.clone())).collect();
    let (svc, dir, pol, none, local_svc, kp_svc, kp_dir, ceiling) =
        (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]);
    // 1,000 Services: 999 more, selecting the same backends, until the client's Node
    // holds them all; then the first ClusterIP again.
    for i in 0..999u32 {
        let ip = format!("10.96.{}.{}", 8 + i / 250, 1 + i % 250);
        run.store
            .create_service(service(&format!("crr-{i}"), &ip, "crr"))
            .unwrap();
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while dump_services(&node_dir(NODES[0]), &Filter::default()).map_or(0, |r| r.len()) < 1_001 {
        assert!(
            Instant::now() < deadline,
            "1,000 Services not programmed in 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (many, many_failed) = rounds_of(&beds[..1], rounds, secs);
    let many_svc = median(&mut many[0].clone());
    // The breakdown: the kernel's BPF statistics on for this phase only (a machine-wide
    // switch that goes off when its descriptor closes, here or if the bench dies), each
    // kind alone. They count every program of Juneau's names on the machine: the bench
    // runs alone.
    let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).expect("BPF statistics");
    let names = ["clusterip", "direct", "policy", "no_policy"];
    let parts: Vec<Breakdown> = beds[..4]
        .iter()
        .zip(names)
        .enumerate()
        .map(|(phase, ((client, to), name))| {
            println!("{name}:");
            breakdown(client, to, phase as u16)
        })
        .collect();
    drop(stats);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in servers {
        s.join().unwrap();
    }
    let spread = |v: &[f64]| {
        let lo = v.iter().cloned().fold(f64::MAX, f64::min);
        let hi = v.iter().cloned().fold(0.0, f64::max);
        format!("{lo:.0}-{hi:.0}")
    };
    let how = format!(
        "median of {rounds} rotated rounds of {secs} s each, one client at a time; 3 Nodes on the standalone stack (real juneau node daemons), servers that accept and close, clients that close by RST"
    );
    let ms = vec![
        Measurement::new(
            "tcp_crr_clusterip_vs_direct",
            "conn/s",
            svc,
            ("direct_to_the_same_backends", dir),
            &format!(
                "goal >= 0.9x; a default-Vpc Pod on Node A to ClusterIP {CLUSTER_IP}:80, whose 3 backends (port {SERVER_PORT}) are on Nodes A, B and C, vs the same backends by their addresses in turn; rounds {} vs {} conn/s, failed {} vs {}; {how}. Per connection, ClusterIP: {}. Direct: {}. The 3 daemons' CPU over the rounds: {daemons_ns:.0} ns per Juneau connection made (the sweep of their entries, every 10 s, and the rest of the daemons' work)",
                spread(&rates[0]),
                spread(&rates[1]),
                failed[0],
                failed[1],
                describe(&parts[0]),
                describe(&parts[1])
            ),
        ),
        Measurement::new(
            "tcp_crr_policy_vs_no_policy",
            "conn/s",
            pol,
            ("the_same_path_without_policy", none),
            &format!(
                "goal >= 0.8x; a Subnet Pod on Node A whose Subnet names a NetworkACL of 64 rules a direction, to a Pod on Node B with 2 SecurityGroups of 64 ingress entries each (the connection allowed by the last rule of the ACL and of the second group), vs the same Subnets' shape and Nodes with neither; rounds {} vs {} conn/s, failed {} vs {}; {how}. Per connection, policy: {}. Without: {}",
                spread(&rates[2]),
                spread(&rates[3]),
                failed[2],
                failed[3],
                describe(&parts[2]),
                describe(&parts[3])
            ),
        ),
        Measurement::new(
            "tcp_crr_clusterip_vs_kube_proxy",
            "conn/s",
            local_svc,
            ("kube_proxy_nftables_clusterip", kp_svc),
            &format!(
                "goal >= 2x; a client and a Service's 3 backends on one Node: Juneau's ClusterIP {LOCAL_IP} (the standalone Node {}) vs kube-proxy's {} ({}, --proxy-mode=nftables, in a Node namespace of plain veths and /32 routes, its Service and EndpointSlice from a real kube-apiserver); rounds {} vs {} conn/s, failed {} vs {}; the same backends directly through kube-proxy's Node (its conntrack on): {kp_dir:.0} conn/s, so its ClusterIP runs at {:.2}x of its own direct path; {how}",
                NODES[0],
                kube_proxy::CLUSTER_IP,
                kube_proxy::Bed::version(),
                spread(&rates[4]),
                spread(&rates[5]),
                failed[4],
                failed[5],
                kp_svc / kp_dir
            ),
        ),
        Measurement::new(
            "tcp_crr_clusterip_local_vs_bare_redirect",
            "conn/s",
            local_svc,
            ("bare_bpf_redirect_peer_both_ways", ceiling),
            &format!(
                "the ceiling of the row above on this machine: the same client and server loops between two plain Pods of one Node whose veths hand every frame to each other by one bare bpf_redirect_peer (floor_redirect_peer both ways: nothing looked up, translated or tracked); rounds {} conn/s; that ceiling is {:.2}x kube-proxy's ClusterIP, so a goal of 2x it lies {} this bed (the handshake of client and server on 2 vCPUs bounds every bed); {how}",
                spread(&rates[7]),
                ceiling / kp_svc,
                if ceiling / kp_svc < 2.0 {
                    "beyond"
                } else {
                    "within"
                }
            ),
        ),
        Measurement::new(
            "tcp_crr_clusterip_1000_services_vs_1",
            "conn/s",
            many_svc,
            ("one_service", svc),
            &format!(
                "goal >= 0.95; the first row's ClusterIP once 1,000 Services are programmed (999 more selecting the same backends, each with its Maglev table), vs the same ClusterIP with the one (the first row's rounds, same run); rounds {} conn/s, failed {}; {how}",
                spread(&many[0]),
                many_failed[0]
            ),
        ),
        Measurement::new(
            "crr_program_ns_clusterip_vs_direct",
            "ns",
            parts[0].ns_per_connection,
            ("direct_program_ns", parts[1].ns_per_connection),
            "the datapath's programs' run time per new connection (all Nodes, all packets of the connection: handshake and RST), from the kernel's BPF statistics over 1,000 connections of each kind (by entry program: a tail-called program's time counts in the program that entered it); the breakdown per program is in tcp_crr_clusterip_vs_direct's note",
        ),
        Measurement::new(
            "crr_program_ns_policy_vs_no_policy",
            "ns",
            parts[2].ns_per_connection,
            ("no_policy_program_ns", parts[3].ns_per_connection),
            "as above, for the policy-checked connection against the same path without policy",
        ),
    ];
    for m in &ms {
        println!(
            "{}: {:.3} ({:.1} vs {:.1})",
            m.name, m.ratio, m.value, m.baseline_value
        );
    }
    write_part("crr", &ms);
    run.teardown(&mut |_| {}).unwrap();
}
