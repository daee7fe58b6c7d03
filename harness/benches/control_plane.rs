//! Control-plane costs: criterion benchmarks of annotation parsing, admission
//! validation and an L2Network's NIC reconcile with 10,000 Pods; then the daemon
//! programming 10,000 endpoints into the maps, memory per FDB entry and per endpoint,
//! and the CNI ADD of an L2 NIC end to end (real plugin binary, real daemon) over 100
//! Pods.
use std::{
    collections::BTreeMap,
    io::Write,
    net::Ipv4Addr,
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use criterion::Criterion;
use juneau::{
    admission::validate::{self, Snapshot},
    api::{
        L2Network, Subnet, Vpc, annotations,
        l2network::{L2Gateway, L2NetworkSpec},
        subnet::SubnetSpec,
        vpc::VpcSpec,
    },
    controller::{self, Config},
    netns::{self, Owned},
    node::{
        Dataplane,
        agent::Agent,
        dataplane::{PortKind, PortSpec},
        server,
    },
    store::{Object, PodRecord, Store},
};
use juneau_common::l2::FDB_ENTRIES;
use juneau_harness::bench::{Measurement, median, write_part};

#[path = "control_plane/cni.rs"]
mod cni;
use cni::cni_part;

fn pods(n: usize) -> Vec<PodRecord> {
    (0..n)
        .map(|i| PodRecord {
            namespace: "team".into(),
            name: format!("pod-{i}"),
            node: format!("node-{}", i % 100),
            annotations: BTreeMap::from([(
                "juneau.loutres.me/networks".to_owned(),
                r#"[{"interface":"eth0","l2Network":"big"}]"#.to_owned(),
            )]),
            ..Default::default()
        })
        .collect()
}

fn big_snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    for v in 0..100 {
        s.vpcs
            .push(Vpc::new(&format!("vpc-{v}"), VpcSpec::default()));
        for k in 0..10 {
            let cidr = format!("10.{}.{}.0/24", v, k * 16);
            s.subnets.push(Subnet::new(
                &format!("s-{v}-{k}"),
                SubnetSpec {
                    vpc: format!("vpc-{v}"),
                    cidr,
                    network_acl: None,
                },
            ));
        }
    }
    let mut big = L2Network::new(
        "big",
        L2NetworkSpec {
            vpc: "vpc-0".into(),
            cidr: Some("10.200.0.0/16".into()),
            gateway: Some(L2Gateway::default()),
            ..Default::default()
        },
    );
    let l2s = Snapshot {
        l2networks: vec![big.clone()],
        ..Default::default()
    };
    big.status = juneau::features::l2::controller::reconcile_with(
        &l2s,
        &Config::default(),
        &controller::acl_refs(&l2s),
    )
    .remove("big");
    s.l2networks.push(big);
    s
}

/// criterion's median estimate (ns) of a benchmark it just ran.
fn estimate(id: &str) -> f64 {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/criterion")
        .join(id)
        .join("new/estimates.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default()).unwrap_or_default();
    v["median"]["point_estimate"].as_f64().unwrap_or(0.0)
}

fn criterion_part(out: &mut Vec<Measurement>) {
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    let ann = pods(1).remove(0).annotations;
    c.bench_function("annotations_parse", |b| {
        b.iter(|| annotations::parse(std::hint::black_box(&ann)).unwrap())
    });
    let snap = big_snapshot();
    let new = L2Network::new(
        "new",
        L2NetworkSpec {
            vpc: "vpc-50".into(),
            cidr: Some("10.250.0.0/24".into()),
            ..Default::default()
        },
    );
    c.bench_function("admission_l2network_create_1000_subnets", |b| {
        b.iter(|| validate::validate_l2network_create(std::hint::black_box(&new), &snap).unwrap())
    });
    let ps = pods(10_000);
    c.bench_function("reconcile_nics_10k", |b| {
        b.iter(|| {
            juneau::features::nics::controller::reconcile_all(std::hint::black_box(&ps), &snap)
        })
    });
    out.push(Measurement::new(
        "annotations_parse",
        "ns",
        estimate("annotations_parse"),
        ("goal", 10_000.0),
        "one networks entry; criterion median",
    ));
    out.push(Measurement::new(
        "admission_l2network_create",
        "us",
        estimate("admission_l2network_create_1000_subnets") / 1e3,
        ("goal", 1_000.0),
        "overlap checks against 1,000 Subnets in 100 Vpcs",
    ));
    out.push(Measurement::new(
        "reconcile_l2network_10k_nics",
        "ms",
        estimate("reconcile_nics_10k") / 1e6,
        ("goal", 1_000.0),
        "10,000 Pods on one /16 L2Network: NICs with first-fit IPAM",
    ));
}

/// Heap bytes in use (glibc's allocator statistics): exact, where RSS moves by pages
/// and hides reuse of freed memory.
fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    unsafe { libc::mallinfo2().uordblks as u64 }
}

fn endpoints_part(out: &mut Vec<Measurement>) {
    let segments = |dp: &mut Dataplane| {
        // 100 segments with a local port each; 10,000 endpoints = 100 remote Nodes each.
        for s in 0..100u32 {
            dp.configure_port(PortSpec {
                ifindex: 1000 + s,
                vni: 5000 + s,
                mtu: 0,
                peer: true,
                security_groups: false,
                kind: PortKind::Switched,
            })
            .unwrap();
        }
    };
    let endpoints: Vec<(u32, Ipv4Addr)> = (0..10_000u32)
        .map(|i| {
            (
                5000 + i % 100,
                Ipv4Addr::new(10, 99, (i / 100 / 250) as u8, (i / 100 % 250) as u8 + 1),
            )
        })
        .collect();
    let mut times = Vec::new();
    for _ in 0..5 {
        let mut fresh = Dataplane::load(None).unwrap();
        segments(&mut fresh);
        let t = Instant::now();
        fresh.add_remotes(&endpoints).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    out.push(Measurement::new(
        "endpoints_10k_program",
        "ms",
        median(&mut times),
        ("goal", 200.0),
        "10,000 NetworkEndpoints of 100 segments on 100 other Nodes into the remote lists, one map write per changed segment; median of 5",
    ));
    let mut dp = Dataplane::load(None).unwrap();
    segments(&mut dp);
    let (mem0, heap0) = (dp.memlock_bytes(), heap_in_use());
    dp.add_remotes(&endpoints).unwrap();
    let (mem1, heap1) = (dp.memlock_bytes(), heap_in_use());
    let per_endpoint = ((mem1 - mem0) + heap1.saturating_sub(heap0)) as f64 / 10_000.0;
    out.push(Measurement::new(
        "memory_per_endpoint",
        "bytes",
        per_endpoint,
        ("cilium_agent_per_pod", 10.5 * 1024.0),
        "goal < 2 KiB; what 10,000 more endpoints add (map memlock from fdinfo + the daemon's heap in use, from mallinfo2) / 10,000; the remote lists are preallocated arrays; the per-segment tables are counted in memory_per_segment",
    ));
    let (one_table, whole) = {
        let mut d2 = Dataplane::load(None).unwrap();
        let before = d2.memlock_bytes();
        d2.configure_port(PortSpec {
            ifindex: 7,
            vni: 7,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Switched,
        })
        .unwrap();
        ((d2.memlock_bytes() - before) as f64, before as f64)
    };
    out.push(Measurement::new(
        "memory_per_fdb_entry",
        "bytes",
        one_table / FDB_ENTRIES as f64,
        ("map_memory_16B_key_48B_value", 138.0),
        "memlock of one segment's learning table / its capacity (preallocated hash)",
    ));
    out.push(Measurement::new("memory_per_segment", "KiB", one_table / 1024.0, ("datapath_fixed_maps", whole / 1024.0), "one L2Network on a Node: its preallocated learning table; baseline = every fixed map of the datapath"));
}

/// `JUNEAU_BENCH_PARTS=cni` (comma-separated: criterion, endpoints, cni) runs only those
/// parts, for profiling one of them; the part file then holds only their figures.
fn main() {
    let only = std::env::var("JUNEAU_BENCH_PARTS").ok();
    let wanted = |part: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| p == part))
    };
    let mut out = Vec::new();
    if wanted("criterion") {
        criterion_part(&mut out);
    }
    if wanted("endpoints") {
        endpoints_part(&mut out);
    }
    if wanted("cni") {
        cni_part(&mut out);
    }
    write_part("control_plane", &out);
}
