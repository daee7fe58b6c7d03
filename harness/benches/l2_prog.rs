//! ns/frame of each `l2_port_ingress` path by BPF_PROG_TEST_RUN (repeat 1,000,000),
//! beside the one-lookup redirect floor loaded in the same run. The learning table is
//! first filled by the datapath itself with random source MACs, so lookups are not
//! cache-hot on a near-empty table.
use aya::{EbpfLoader, maps::HashMap, programs::SchedClassifier};
use juneau::node::{Dataplane, dataplane::PortSpec};
use juneau_harness::{
    frames::{self, BROADCAST, fixtures::*},
    testrun::{PortBed, run_tc},
};

const VNI: u32 = 7;
const REPEAT: u32 = 1_000_000;

fn main() {
    let fill: usize = std::env::var("FDB_FILL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8000);
    let bed = PortBed::new(5);
    let mut dp = Dataplane::load(None).expect("load");
    for i in 0..5 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i),
            vni: VNI,
            mtu: 0,
            peer: true,
        })
        .unwrap();
    }
    // Learn `fill` random MACs on port 4 (xorshift, fixed seed: reproducible).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..fill {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        let mac = [0x02, b[1], b[2], b[3], b[4], b[5]];
        run_tc(
            &bed.ns,
            dp.l2_port_program(),
            bed.ifindex(4),
            &frames::raw(BROADCAST, mac, 0x88b5, b"fill"),
            1,
        );
    }
    // Pod 1 on port 1 is a known destination.
    run_tc(
        &bed.ns,
        dp.l2_port_program(),
        bed.ifindex(1),
        &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hi"),
        1,
    );
    let learned = dp.fdb(VNI).unwrap().len();

    let mut floor = EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load floor");
    {
        let mut fwd: HashMap<_, u32, u32> =
            HashMap::try_from(floor.map_mut("jn_floor_fwd").unwrap()).unwrap();
        fwd.insert(bed.ifindex(0), bed.ifindex(1), 0).unwrap();
    }
    let prog: &mut SchedClassifier = floor
        .program_mut("floor_redirect")
        .unwrap()
        .try_into()
        .unwrap();
    prog.load().unwrap();

    let unicast = frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"known unicast");
    let flood = frames::raw(BROADCAST, pod_mac(0), 0x88b5, b"flood");
    let ns_of = |f: &dyn Fn() -> std::time::Duration| f().as_nanos() as f64;
    // Interleave A/B so drift affects both alike; report the median of 5 rounds.
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("floor (1 lookup + bpf_redirect)", vec![]),
        ("known unicast", vec![]),
        ("flood to 4 local ports", vec![]),
    ];
    for _ in 0..5 {
        rows[0].1.push(ns_of(&|| {
            run_tc(&bed.ns, prog, bed.ifindex(0), &unicast, REPEAT).per_run
        }));
        rows[1].1.push(ns_of(&|| {
            run_tc(
                &bed.ns,
                dp.l2_port_program(),
                bed.ifindex(0),
                &unicast,
                REPEAT,
            )
            .per_run
        }));
        rows[2].1.push(ns_of(&|| {
            run_tc(
                &bed.ns,
                dp.l2_port_program(),
                bed.ifindex(0),
                &flood,
                REPEAT / 10,
            )
            .per_run
        }));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let floor_ns = median(&mut rows[0].1.clone());
    println!(
        "l2_port_ingress, BPF_PROG_TEST_RUN, FDB {learned} entries, median of 5 interleaved rounds"
    );
    println!("{:<36} {:>10} {:>8}", "path", "ns/frame", "x floor");
    let insns = |p: &SchedClassifier| {
        p.info()
            .ok()
            .and_then(|i| i.verified_instruction_count())
            .unwrap_or(0)
    };
    println!(
        "verifier: l2_port_ingress {} instructions processed, floor {}",
        insns(dp.l2_port_program()),
        insns(prog)
    );
    for (name, v) in rows.iter_mut() {
        let m = median(v);
        println!("{name:<36} {m:>10.1} {:>8.2}", m / floor_ns);
    }
}
