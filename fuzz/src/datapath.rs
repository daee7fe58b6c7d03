//! The datapath as a fuzz target: arbitrary frames through `port_ingress` of a Node
//! whose ports are Subnet NICs consuming Services (so the router, the Service stage,
//! the connection table and the delivery stage all see them), by BPF_PROG_TEST_RUN.
//! Every run must end in a known verdict; a dropped frame must be counted under a
//! named reason; a refused frame must leave no connection entry.
//!
//! The first byte picks the port the frame enters (three Subnet ports: a client and
//! two backends), the rest is the frame (14 to 3,000 bytes: what BPF_PROG_TEST_RUN
//! takes). The bed is made once per process and torn down when it exits (its
//! namespace deleted by name), also after a failing run.
use std::{collections::BTreeMap, net::Ipv4Addr, sync::Mutex};

use juneau::{
    features::services::node::{Frontend, FrontendKey, ServiceState},
    node::{
        Dataplane,
        dataplane::{PortKind, PortSpec, Whole},
    },
};
use juneau_harness::{
    frames::fixtures::pod_mac,
    router::{self, Seg},
    testrun::{PortBed, TC_ACT_REDIRECT, TC_ACT_SHOT, try_run_tc},
};

const VNI: u32 = 12;
const PORTS: usize = 3;
/// Entries of the bed's connection table; emptied when it fills (a full table is a
/// verdict too, but the fuzzer should keep reaching the paths behind it).
const CT_ENTRIES: u32 = 256;

struct Bed {
    dp: Whole,
    bed: PortBed,
}

static BED: Mutex<Option<Bed>> = Mutex::new(None);

extern "C" fn tear_down() {
    // A panicking run poisoned the lock: the bed goes all the same.
    drop(BED.lock().unwrap_or_else(|e| e.into_inner()).take());
}

const fn ip(i: u8) -> [u8; 4] {
    [10, 0, 3, 10 + i]
}

fn bed() -> Bed {
    let bed = PortBed::new(PORTS);
    let mut dp = Whole::of(Dataplane::load_sized(None, CT_ENTRIES).expect("load the datapath"))
        .expect("the datapath's writers");
    let seg = Seg {
        vni: VNI,
        cidr: "10.0.3.0/24",
        gw: [10, 0, 3, 1],
        gw_mac: [0x02, 0x4a, 0x4e, 0, 0, 12],
        mtu: 1500,
    };
    let nbrs: Vec<_> = (0..PORTS as u8)
        .map(|i| (VNI, ip(i), pod_mac(i), Ipv4Addr::UNSPECIFIED))
        .collect();
    dp.sync_router(&router::state(&[seg], &nbrs))
        .expect("router");
    for i in 0..PORTS as u8 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i as usize),
            vni: VNI,
            mtu: 1500,
            peer: true,
            security_groups: false,
            kind: PortKind::Subnet {
                mac: pod_mac(i),
                ip: ip(i).into(),
            },
        })
        .expect("port");
    }
    let front = |a: [u8; 4], port, proto, backends: &[(u8, u16)], affinity| {
        (
            FrontendKey {
                ip: a.into(),
                port,
                proto,
            },
            Frontend {
                backends: backends.iter().map(|(i, p)| (ip(*i).into(), *p)).collect(),
                affinity_s: affinity,
            },
        )
    };
    dp.sync_services(&ServiceState {
        frontends: BTreeMap::from([
            front([10, 96, 0, 10], 53, 17, &[(1, 5353)], None),
            front([10, 96, 0, 1], 443, 6, &[(1, 6443), (2, 6443)], None),
            front([10, 96, 0, 20], 80, 6, &[], None),
            front([10, 96, 0, 30], 80, 6, &[(1, 8080), (2, 8080)], Some(60)),
            front([10, 96, 0, 40], 9, 132, &[(2, 9)], None),
        ]),
        // No Service source address is set on this bed: a backend outside every
        // Subnet is refused (NO_SOURCE_ADDRESS) before any entry is written.
        host_backends: Default::default(),
        provider_backends: Default::default(),
    })
    .expect("services");
    Bed { dp, bed }
}

fn dropped(dp: &Dataplane) -> u64 {
    dp.drops().expect("drop counters").values().sum()
}

pub fn datapath(data: &[u8]) {
    let Some((&port, frame)) = data.split_first() else {
        return;
    };
    // What BPF_PROG_TEST_RUN refuses itself (shorter than an Ethernet header, longer
    // than its page) never reaches a program.
    if frame.len() < 14 || frame.len() > 3000 {
        return;
    }
    let mut guard = BED.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_none() {
        *guard = Some(bed());
        // SAFETY: registers a plain function; it runs once at exit.
        unsafe { libc::atexit(tear_down) };
    }
    let b = guard.as_mut().expect("made above");
    let before =
        b.dp.conntrack
            .entries()
            .expect("the connection table")
            .len();
    if before as u32 > CT_ENTRIES - 8 {
        b.dp.conntrack.sweep(Some(u64::MAX / 2)).expect("sweep");
    }
    let before =
        b.dp.conntrack
            .entries()
            .expect("the connection table")
            .len();
    let drops = dropped(&b.dp);
    let port = port as usize % PORTS;
    let Ok(run) = try_run_tc(
        &b.bed.ns,
        b.dp.l2_port_program(),
        b.bed.ifindex(port),
        frame,
        1,
    ) else {
        // The kernel made no skb of it (a truncated IPv4 header, say): nothing ran.
        return;
    };
    let after =
        b.dp.conntrack
            .entries()
            .expect("the connection table")
            .len();
    match run.verdict {
        TC_ACT_SHOT => {
            assert!(
                dropped(&b.dp) > drops,
                "a frame was dropped under no named reason: {frame:02x?}"
            );
            assert_eq!(
                after, before,
                "a refused frame left connection entries: {frame:02x?}"
            );
        }
        // Passed to the stack, or redirected (to a port, or back as an ICMP error).
        0 | TC_ACT_REDIRECT => {
            assert!(
                after <= before + 2,
                "one frame made more than a connection's pair"
            );
        }
        v => panic!("unknown verdict {v} for {frame:02x?}"),
    }
}
