//! ClusterIP Services in the datapath beside their baselines, in one run:
//! - program cost (BPF_PROG_TEST_RUN, single runs, interleaved, median of rounds): a
//!   packet of an established connection to a ClusterIP (connection lookup, the
//!   destination rewritten, routed to the backend) against the same packet sent to the
//!   backend's address (routed, no Service: the lookups miss);
//! - the same from another Vpc (`svc/cross_vpc.rs`, SVC-02) against the same Vpc;
//! - Maglev: the share of a Service's table that moves when 1 of 10 backends goes
//!   (the table rebalanced from the one written) against a table computed afresh;
//! - a full connection table: established connections keep flowing (lost packets
//!   counted at the receiving port's frame) while new ones are refused and counted;
//! - programming: 10,000 Services with 10 backends each (100,000 endpoints) into the
//!   maps, against the same frontends written without their Maglev tables;
//! - propagation (`svc/propagation.rs`): a new Service and a backend gone, until every
//!   Node's maps show it, on the standalone stack.
#[path = "svc/cross_vpc.rs"]
mod cross_vpc;
#[path = "svc/propagation.rs"]
mod propagation;

use std::{collections::BTreeMap, net::Ipv4Addr, time::Instant};

use juneau::features::services::node::{Frontend, FrontendKey, ServiceState, maglev};
use juneau::node::dataplane::{PortKind, PortSpec, Whole};
use juneau_common::{ct::PROTO_TCP, svc::MAGLEV_SLOTS};
use juneau_harness::{
    bench::{Measurement, interleaved_medians, median, write_part},
    frames::{self, fixtures::*},
    router::{self, Seg},
    testrun::{PortBed, TC_ACT_REDIRECT, run_tc},
};

const VNI_S: u32 = 12;
const GW_S: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 12];
const API: [u8; 4] = [10, 96, 0, 1];
const SINGLE: usize = 5_000;
const ROUNDS: usize = 5;

const fn s_ip(i: u8) -> [u8; 4] {
    [10, 0, 3, 10 + i]
}

fn api() -> ServiceState {
    ServiceState {
        frontends: BTreeMap::from([(
            FrontendKey {
                ip: API.into(),
                port: 443,
                proto: PROTO_TCP,
            },
            Frontend {
                backends: vec![(s_ip(1).into(), 6443), (s_ip(2).into(), 6443)],
                affinity_s: None,
            },
        )]),
        ..Default::default()
    }
}

fn bed(ct_entries: u32) -> (PortBed, Whole) {
    let bed = PortBed::new(3);
    let mut dp = Whole::of(juneau::node::Dataplane::load_sized(None, ct_entries).expect("load"))
        .expect("writers");
    let here = Ipv4Addr::UNSPECIFIED;
    let seg = Seg {
        vni: VNI_S,
        cidr: "10.0.3.0/24",
        gw: [10, 0, 3, 1],
        gw_mac: GW_S,
        mtu: 1500,
    };
    let nbrs: Vec<_> = (0..3u8)
        .map(|i| (VNI_S, s_ip(i), pod_mac(i), here))
        .collect();
    dp.sync_router(&router::state(&[seg], &nbrs)).unwrap();
    for i in 0..3u8 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i as usize),
            vni: VNI_S,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Subnet {
                mac: pod_mac(i),
                ip: s_ip(i).into(),
            },
        })
        .unwrap();
    }
    dp.sync_services(&api()).unwrap();
    (bed, dp)
}

fn program_cost(out: &mut Vec<Measurement>) {
    let (bed, dp) = bed(1024);
    let send = |f: &[u8]| run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(0), f, 1);
    let client = |sport| (pod_mac(0), s_ip(0), sport);
    let syn = frames::tcp(client(50000), (GW_S, API, 443), true, b"");
    let backend = send(&syn).data[33] - 10;
    let established = frames::tcp(client(50000), (GW_S, API, 443), false, &[0; 6]);
    let routed = frames::tcp(client(50001), (GW_S, s_ip(backend), 6443), false, &[0; 6]);
    let (established_ns, routed_ns) = interleaved_medians(
        ROUNDS,
        SINGLE / ROUNDS,
        || {
            let a = send(&established);
            assert_eq!(a.verdict, TC_ACT_REDIRECT);
            assert_eq!(a.data[33] - 10, backend, "translated");
            a.per_run.as_nanos() as f64
        },
        || {
            let b = send(&routed);
            assert_eq!(b.verdict, TC_ACT_REDIRECT);
            b.per_run.as_nanos() as f64
        },
    );
    out.push(Measurement::new(
        "svc_established_vs_routed",
        "ns",
        established_ns,
        ("routed_to_the_backend_no_service", routed_ns),
        "goal <= 1.3x; a TCP segment of an established connection to a ClusterIP from a Subnet Pod through port_ingress (tail call to the router: connection lookup, destination and checksums rewritten, routed to the backend on a local port, the reply lookup at delivery) vs the same segment sent to the backend's address (the lookups miss); single runs, median of 1,000 per round, median of 5 rounds",
    ));
}

fn churn(out: &mut Vec<Measurement>) {
    let (mut kept, mut fresh) = (Vec::new(), Vec::new());
    for set in 0..20u8 {
        let before: Vec<[u8; 6]> = (0..10u8).map(|i| [10, set, 0, i, 0x19, 0x2b]).collect();
        let t0 = maglev::table(&before, MAGLEV_SLOTS);
        for gone in 0..10 {
            let after: Vec<[u8; 6]> = before
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != gone)
                .map(|(_, b)| *b)
                .collect();
            let share = |t1: &[u32]| {
                t0.iter()
                    .zip(t1)
                    .filter(|(a, b)| before[**a as usize] != after[**b as usize])
                    .count() as f64
                    / MAGLEV_SLOTS as f64
            };
            kept.push(share(&maglev::rebalance(
                &t0,
                &before,
                &after,
                MAGLEV_SLOTS,
            )));
            fresh.push(share(&maglev::table(&after, MAGLEV_SLOTS)));
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let worst = kept.iter().copied().fold(0.0, f64::max);
    out.push(Measurement::new(
        "maglev_churn",
        "share",
        mean(&kept),
        ("maglev_table_afresh", mean(&fresh)),
        &format!(
            "goal <= 0.11 (ideal 0.10: the removed backend's own slots); the share of a Service's {MAGLEV_SLOTS}-slot table whose backend changes when 1 of 10 backends goes, mean over 20 backend sets x 10 removals (worst {worst:.4}); the table rebalanced from the one written vs plain Maglev computed afresh; established connections never move (their entry names the backend)"
        ),
    ));
}

fn full_table(out: &mut Vec<Measurement>) {
    // Room for 500 connections (two entries each).
    let (bed, dp) = bed(1000);
    let send = |f: &[u8]| run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(0), f, 1);
    let client = |sport| (pod_mac(0), s_ip(0), sport);
    for sport in 0..500u16 {
        let run = send(&frames::tcp(
            client(20000 + sport),
            (GW_S, API, 443),
            true,
            b"",
        ));
        assert_eq!(run.verdict, TC_ACT_REDIRECT, "connection {sport}");
    }
    let drops = || dp.drops().unwrap().get("CT_FULL").copied().unwrap_or(0);
    let mut refused = 0;
    for sport in 0..100u16 {
        if send(&frames::tcp(
            client(40000 + sport),
            (GW_S, API, 443),
            true,
            b"",
        ))
        .verdict
            != TC_ACT_REDIRECT
        {
            refused += 1;
        }
    }
    let mut lost = 0;
    for sport in 0..500u16 {
        let run = send(&frames::tcp(
            client(20000 + sport),
            (GW_S, API, 443),
            false,
            b"data",
        ));
        if run.verdict != TC_ACT_REDIRECT || run.data[30..32] != [10, 0] {
            lost += 1;
        }
    }
    assert_eq!(refused, 100);
    out.push(Measurement::new(
        "conntrack_full_established_kept",
        "lost",
        lost as f64,
        ("new_connections_refused", refused as f64),
        &format!(
            "goal 0 lost; a table of 1,000 entries holding 500 connections: 100 new ones refused (CT_FULL counted {}), then a packet of each of the 500 established ones, translated and delivered or lost",
            drops()
        ),
    ));
}

fn programming(out: &mut Vec<Measurement>) {
    let services = 10_000u32;
    let want = |backends: u8| ServiceState {
        frontends: (0..services)
            .map(|i| {
                let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 96, 0, 0)) + i);
                (
                    FrontendKey {
                        ip,
                        port: 80,
                        proto: PROTO_TCP,
                    },
                    Frontend {
                        backends: (0..backends)
                            .map(|b| {
                                let a = u32::from(Ipv4Addr::new(10, 128, 0, 0)) + i * 16 + b as u32;
                                (Ipv4Addr::from(a), 8080)
                            })
                            .collect(),
                        affinity_s: None,
                    },
                )
            })
            .collect(),
        ..Default::default()
    };
    let with = want(10);
    let mut dp = Whole::load(None).expect("load");
    let t = Instant::now();
    dp.sync_services(&with).unwrap();
    let took = t.elapsed().as_secs_f64() * 1e3;
    // One endpoint of one Service changed (and back), with the 10,000 programmed:
    // against a sync of the same 10,000 with nothing changed.
    let mut changed = with.clone();
    let one = changed
        .frontends
        .values_mut()
        .nth(5_000)
        .expect("10,000 frontends");
    one.backends[3] = (Ipv4Addr::new(10, 200, 0, 1), 8080);
    let (mut change, mut same) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS * 4 {
        let next = if i % 2 == 0 { &changed } else { &with };
        let t = Instant::now();
        dp.sync_services(next).unwrap();
        change.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        dp.sync_services(next).unwrap();
        same.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let worst = change.iter().cloned().fold(0.0, f64::max);
    out.push(Measurement::new(
        "svc_endpoint_change_10k",
        "ms",
        median(&mut change),
        ("unchanged_sync_10k", median(&mut same)),
        &format!(
            "goal <= 10 (issue 42); one endpoint of one Service replaced (and put back, in turn), 10,000 Services of 10 endpoints programmed: the Services' writer's sync of the whole desired state, which compares every frontend and rewrites that Service's backend entry, Maglev table and frontend only; vs the same sync with nothing changed (the comparison alone); median of {} changes, worst {worst:.2} ms",
            ROUNDS * 4
        ),
    ));
    drop(dp);
    // The baseline: the same frontends without backends (no tables, no backends).
    let mut dp = Whole::load(None).expect("load");
    let t = Instant::now();
    dp.sync_services(&want(0)).unwrap();
    let bare = t.elapsed().as_secs_f64() * 1e3;
    out.push(Measurement::new(
        "svc_10k_program",
        "ms",
        took,
        ("frontends_only", bare),
        &format!(
            "goal < 1,000 (issue 42); 10,000 Services with 10 backends each (100,000 endpoints) written by the Services' writer into empty maps from a cold start: 100,000 backend entries, 10,000 Maglev tables of {MAGLEV_SLOTS} slots (an mmapable inner array each, filled through a mapping of its values, then one batch into the map of maps) and 10,000 frontends, vs the frontends alone. Memory by construction: per Service its table, {} B ({MAGLEV_SLOTS} x 8: an mmapable array keeps each value in 8 bytes, two pages), and a 16 B frontend in a hash; per backend 8 B (a preallocated array of {})",
            MAGLEV_SLOTS * 8,
            juneau_common::svc::MAX_BACKENDS
        ),
    ));
}

fn main() {
    let mut out = Vec::new();
    program_cost(&mut out);
    cross_vpc::run(&mut out);
    churn(&mut out);
    full_table(&mut out);
    programming(&mut out);
    propagation::run(&mut out);
    write_part("svc", &out);
}
