//! ns/frame of each `port_ingress` path by BPF_PROG_TEST_RUN (repeat 1,000,000),
//! beside the one-lookup `bpf_redirect` floor loaded in the same run, interleaved,
//! median of 5 rounds. The learning tables are filled by the datapath itself with
//! random source MACs (10,000 and 100,000 in all; one segment holds at most 8,192, so the
//! rest sit in other segments), so lookups do not run on a near-empty, cache-hot table.
use std::net::Ipv4Addr;

use aya::{EbpfLoader, maps::HashMap, programs::SchedClassifier};
use juneau::node::{
    Dataplane,
    dataplane::{PortKind, PortSpec},
};
use juneau_harness::{
    bench::{Measurement, median, write_part},
    frames::{self, BROADCAST, fixtures::*},
    testrun::{PortBed, TC_ACT_REDIRECT, run_tc, run_tc_each},
};

const VNI: u32 = 7;
const REPEAT: u32 = 1_000_000;
const ROUNDS: usize = 5;

/// Teaches segment(s) `n` random MACs through the datapath (xorshift, fixed seed).
fn fill(bed: &PortBed, dp: &mut Dataplane, n: usize) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        [0x02, b[1], b[2], b[3], b[4], b[5]]
    };
    let in_bench = n.min(8000);
    for _ in 0..in_bench {
        run_tc(
            &bed.ns,
            dp.l2_port_program(),
            bed.ifindex(4),
            &frames::raw(BROADCAST, next(), 0x88b5, b"fill"),
            1,
        );
    }
    // The rest in other segments, one (fake, single-port) port each.
    let mut left = n - in_bench;
    static NEXT_PORT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(60_000);
    let mut port = NEXT_PORT.fetch_add(100, std::sync::atomic::Ordering::Relaxed);
    while left > 0 {
        dp.configure_port(PortSpec {
            ifindex: port,
            vni: 10_000 + port,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Switched,
        })
        .unwrap();
        let chunk = left.min(8000);
        run_tc_each(
            &bed.ns,
            dp.l2_port_program(),
            port,
            &mut (0..chunk).map(|_| frames::raw(BROADCAST, next(), 0x88b5, b"fill")),
        );
        left -= chunk;
        port += 1;
    }
}

fn ns_per(run: juneau_harness::testrun::Run) -> f64 {
    run.per_run.as_nanos() as f64
}

fn main() {
    let bed = PortBed::new(5);
    // An underlay and a Juneau VXLAN device, so the remote flood really encapsulates.
    let mut dp = bed.bring_up_node();
    for (ip, mac) in [
        ("10.99.0.2", "02:00:00:99:00:02"),
        ("10.99.0.3", "02:00:00:99:00:03"),
    ] {
        bed.ns.ip(&[
            "neigh",
            "replace",
            ip,
            "lladdr",
            mac,
            "dev",
            "ul0",
            "nud",
            "permanent",
        ]);
    }
    for i in 0..5 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i),
            vni: VNI,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Switched,
        })
        .unwrap();
    }
    const REMOTE_VNI: u32 = 8;
    dp.configure_port(PortSpec {
        ifindex: 59_999,
        vni: REMOTE_VNI,
        mtu: 0,
        peer: true,
        security_groups: false,
        kind: PortKind::Switched,
    })
    .unwrap();
    for ip in [Ipv4Addr::new(10, 99, 0, 2), Ipv4Addr::new(10, 99, 0, 3)] {
        dp.add_remote(REMOTE_VNI, ip).unwrap();
    }
    run_tc(
        &bed.ns,
        dp.l2_port_program(),
        bed.ifindex(1),
        &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hi"),
        1,
    );

    let mut floor = EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load floor");
    {
        let mut fwd: HashMap<_, u32, u32> =
            HashMap::try_from(floor.map_mut("jn_floor_fwd").unwrap()).unwrap();
        fwd.insert(bed.ifindex(0), bed.ifindex(1), 0).unwrap();
    }
    for name in ["floor_redirect", "floor_learn"] {
        let prog: &mut SchedClassifier = floor.program_mut(name).unwrap().try_into().unwrap();
        prog.load().unwrap();
    }
    let floor_program =
        |name: &str| -> &SchedClassifier { floor.program(name).unwrap().try_into().unwrap() };
    let floor_prog = floor_program("floor_redirect");
    let unicast = frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"known unicast");
    let flood = frames::raw(BROADCAST, pod_mac(0), 0x88b5, b"flood");
    let p = |dp: &Dataplane, port: u32, f: &[u8], repeat: u32| {
        ns_per(run_tc(&bed.ns, dp.l2_port_program(), port, f, repeat))
    };
    let floor_ns = |f: &[u8]| ns_per(run_tc(&bed.ns, floor_prog, bed.ifindex(0), f, REPEAT));

    let mut out = Vec::new();
    let ratio_at = |dp: &mut Dataplane, total: usize| {
        fill(&bed, dp, total);
        let (mut f, mut u) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            f.push(floor_ns(&unicast));
            u.push(p(dp, bed.ifindex(0), &unicast, REPEAT));
        }
        (median(&mut u), median(&mut f))
    };
    let (u10, f10) = ratio_at(&mut dp, 10_000);
    out.push(Measurement::new(
        "l2_known_unicast_vs_floor",
        "ns",
        u10,
        ("floor_redirect", f10),
        "goal <= 1.3x; 10,000 learned MACs",
    ));
    let (mut fl, mut fr, mut ff) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        ff.push(floor_ns(&unicast));
        fl.push(p(&dp, bed.ifindex(0), &flood, REPEAT / 10));
        fr.push(p(&dp, 59_999, &flood, REPEAT / 10));
    }
    let floor_b = median(&mut ff);
    out.push(Measurement::new(
        "l2_flood_4_local_vs_floor",
        "ns",
        median(&mut fl),
        ("floor_redirect", floor_b),
        "3 clones on real veths + 1 redirect",
    ));
    out.push(Measurement::new(
        "l2_flood_2_remote_vs_floor",
        "ns",
        median(&mut fr),
        ("floor_redirect", floor_b),
        "2 VTEPs: tunnel key + clone to the VXLAN device, last by redirect",
    ));
    // Learning a new MAC: every frame a new source (repeat 1 each, kernel-timed), in a
    // segment of its own whose table has room (8,000 new sources into 8,192 places),
    // to a destination known there; then new sources into the now full table, whose
    // learning is refused and counted.
    const LEARN_VNI: u32 = 11;
    let (learner, known) = (58_001, 58_002);
    for ifindex in [learner, known] {
        dp.configure_port(PortSpec {
            ifindex,
            vni: LEARN_VNI,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Switched,
        })
        .unwrap();
    }
    let dst = [0x02, 0xdd, 0, 0, 0, 11];
    p(&dp, known, &frames::raw(BROADCAST, dst, 0x88b5, b"dst"), 1);
    let new_source = |i: u32| {
        let b = i.to_be_bytes();
        frames::raw(dst, [0x02, 0xee, b[0], b[1], b[2], b[3]], 0x88b5, b"new")
    };
    let cap = juneau_common::l2::FDB_ENTRIES;
    // The ceiling: the same new sources into a table of the same shape by
    // `floor_learn`, the kernel's hash table with nothing of ours around it (its
    // destination taught the same way, from the other port).
    let bare_learn = floor_program("floor_learn");
    let bare = |f: &[u8], ingress: u32| run_tc(&bed.ns, bare_learn, ingress, f, 1);
    bare(&frames::raw(BROADCAST, dst, 0x88b5, b"dst"), bed.ifindex(1));
    let bare = |f: &[u8], ingress: u32| {
        let run = bare(f, ingress);
        assert_eq!(
            run.verdict, TC_ACT_REDIRECT,
            "floor_learn forwards to the known destination"
        );
        ns_per(run)
    };
    // Each learning run is paired with a floor run right after it, so all three see the
    // same moment of the machine (a single run's fixed cost moved between 89 and 220 ns
    // from one stretch of runs to the next here); ours and the ceiling take turns first.
    let single_floor = || ns_per(run_tc(&bed.ns, floor_prog, bed.ifindex(0), &unicast, 1));
    let mut bare_runs = Vec::with_capacity(8_000);
    let (learn, floor1): (Vec<f64>, Vec<f64>) = (0..8_000u32)
        .map(|i| {
            let f = new_source(i);
            let ours = if i % 2 == 0 {
                let ours = p(&dp, learner, &f, 1);
                bare_runs.push(bare(&f, bed.ifindex(0)));
                ours
            } else {
                bare_runs.push(bare(&f, bed.ifindex(0)));
                p(&dp, learner, &f, 1)
            };
            (ours, single_floor())
        })
        .unzip();
    let bare_table: HashMap<_, juneau_common::FdbKey, juneau_common::FdbEntry> =
        HashMap::try_from(floor.map("jn_floor_fdb").unwrap()).unwrap();
    assert_eq!(
        bare_table.keys().count(),
        8_001,
        "floor_learn learned every source"
    );
    for i in 8_000..cap {
        p(&dp, learner, &new_source(i), 1);
    }
    assert_eq!(dp.fdb(LEARN_VNI).unwrap().len() as u32, cap, "table full");
    let (refused, floor2): (Vec<f64>, Vec<f64>) = (cap..cap + 5_000)
        .map(|i| (p(&dp, learner, &new_source(i), 1), single_floor()))
        .unzip();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    out.push(Measurement::new(
        "l2_learn_new_mac_vs_floor",
        "ns",
        mean(&learn),
        ("floor_redirect_single_run", mean(&floor1)),
        "8,000 runs of repeat 1, each a new source MAC learned into a segment table with room, to a known destination; each taking turns with floor_learn on the same source, the pair followed by a single run of the floor (before session 11: ours and the floor alone); means",
    ));
    out.push(Measurement::new(
        "l2_bare_learn_vs_floor",
        "ns",
        mean(&bare_runs),
        ("floor_redirect_single_run", mean(&floor1)),
        "the ceiling of l2_learn_new_mac_vs_floor: the floor object's floor_learn (source looked up and inserted into a preallocated hash table of a segment's shape, destination looked up, bpf_redirect; no clock, no rules), the same 8,000 new sources, interleaved with ours run for run; means",
    ));
    out.push(Measurement::new(
        "l2_learn_new_mac_vs_bare_learn",
        "ns",
        mean(&learn),
        ("floor_learn_single_run", mean(&bare_runs)),
        "ours against the kernel's hash table alone, from the two rows above",
    ));
    out.push(Measurement::new(
        "l2_new_mac_full_table_vs_floor",
        "ns",
        mean(&refused),
        ("floor_redirect_single_run", mean(&floor2)),
        "5,000 runs of repeat 1, each a new source MAC into a full segment table: learning refused and counted, frame forwarded (a MAC flood); each followed by a single run of the floor; means",
    ));
    let (u100, f100) = ratio_at(&mut dp, 90_000);
    out.push(Measurement::new(
        "l2_known_unicast_100k_vs_floor",
        "ns",
        u100,
        ("floor_redirect", f100),
        "100,000 learned MACs in all (8,192 per segment)",
    ));
    // The datapath's own VXLAN paths. Both rewrite the frame, so every run is a single
    // one (BPF_PROG_TEST_RUN repeats on the same skb): mean of single runs beside the
    // floor's single runs. Decapsulation first: it also teaches the segment a MAC
    // behind 10.99.0.2, the destination of the encapsulation run.
    let underlay = dp.program("underlay_ingress");
    let behind = [0x02, 0xdd, 0, 0, 0, 2];
    let from_remote = frames::vxlan(
        ([0x02, 0, 0, 0x99, 0, 1], [0x02, 0, 0, 0x99, 0, 2]),
        [10, 99, 0, 2],
        [10, 99, 0, 1],
        VNI,
        &frames::udp((behind, [10, 0, 1, 99]), (pod_mac(1), pod_ip(1)), &[0; 18]),
    );
    // Measure the paths meant, not an early exit: both must redirect (TC_ACT_REDIRECT),
    // the decapsulated frame being the inner one.
    let first = run_tc(&bed.ns, underlay, bed.ifindex(0), &from_remote, 1);
    assert_eq!(
        first.verdict, TC_ACT_REDIRECT,
        "decapsulation did not redirect"
    );
    assert_eq!(first.data, from_remote[50..], "decapsulated frame");
    const SINGLE: usize = 5_000;
    let decap: Vec<f64> = (0..SINGLE)
        .map(|_| ns_per(run_tc(&bed.ns, underlay, bed.ifindex(0), &from_remote, 1)))
        .collect();
    let to_remote = frames::udp((pod_mac(0), pod_ip(0)), (behind, [10, 0, 1, 99]), &[0; 18]);
    let first = run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(0), &to_remote, 1);
    assert_eq!(
        first.verdict, TC_ACT_REDIRECT,
        "encapsulation did not redirect"
    );
    assert_eq!(first.data.len(), to_remote.len() + 50, "encapsulated frame");
    let encap: Vec<f64> = (0..SINGLE)
        .map(|_| p(&dp, bed.ifindex(0), &to_remote, 1))
        .collect();
    let floor1 = mean(&floor1[..SINGLE]);
    out.push(Measurement::new(
        "l2_underlay_decap_vs_floor",
        "ns",
        mean(&decap),
        ("floor_redirect_single_run", floor1),
        "VXLAN frame from another Node to a local Pod: parse, learn the inner source, remove 50 bytes, redirect_peer; 5,000 runs of repeat 1",
    ));
    out.push(Measurement::new(
        "l2_known_remote_unicast_encap_vs_floor",
        "ns",
        mean(&encap),
        ("floor_redirect_single_run", floor1),
        "IPv4 frame to a MAC behind another Node: add and write 50 bytes of headers, redirect_neigh; 5,000 runs of repeat 1",
    ));
    let insns = |p: &SchedClassifier| {
        p.info()
            .ok()
            .and_then(|i| i.verified_instruction_count())
            .unwrap_or(0) as f64
    };
    out.push(Measurement::new(
        "verifier_port_ingress",
        "insns",
        insns(dp.l2_port_program()),
        ("reference_l2_egress", 2786.0),
        "goal: lower",
    ));
    out.push(Measurement::new(
        "verifier_overlay_ingress",
        "insns",
        insns(dp.program("overlay_ingress")),
        ("reference_vxlan_ingress", 5282.0),
        "goal: lower",
    ));
    let (vx, ul) = (
        insns(dp.program("overlay_ingress")),
        insns(dp.program("underlay_ingress")),
    );
    out.push(Measurement::new(
        "verifier_underlay_ingress",
        "insns",
        ul,
        ("reference_vxlan_ingress", 5282.0),
        &format!(
            "goal: lower; the receive job is split between this program and overlay_ingress, together {}",
            vx + ul
        ),
    ));
    write_part("prog", &out);
}
