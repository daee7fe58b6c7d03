//! NetworkACL and SecurityGroup in the datapath beside their baselines, in one run:
//! - program cost (BPF_PROG_TEST_RUN, single runs, interleaved, median of rounds): a
//!   TCP segment of an established connection routed from Subnet A to Subnet B
//!   through `port_ingress` (gw_route -> gw_forward -> deliver_svc), A's segment naming
//!   a NetworkACL of 64 entries a direction and the receiving NIC carrying 2
//!   SecurityGroups of 64 entries each, against the same segment on the same bed shape
//!   without policy, and the floor program's one-lookup redirect (the ceiling);
//! - new connections: SYNs of distinct source ports through the same two beds;
//! - a rule change: from `PolicyWriter::sync` of the changed set until a test-run frame
//!   of the established connection is denied, against a sync that changes nothing;
//! - the verifier's counts of the three programs the policy lives in, loaded over maps
//!   holding no rule sets, 64-entry and 128-entry ones (pinned maps, adopted);
//! - the same rule change on the standalone stack (`policy/stack.rs`), from the
//!   object's update until every Node's datapath holds it.
#[path = "policy/stack.rs"]
mod stack;

use std::{net::Ipv4Addr, path::PathBuf, time::Instant};

use aya::{EbpfLoader, maps::HashMap, programs::SchedClassifier};
use juneau::{
    features::policy::node::PolicyState,
    node::{
        Dataplane,
        dataplane::{PortKind, PortSpec, Whole},
    },
};
use juneau_harness::{
    bench::{Measurement, median, write_part},
    frames::{self, fixtures::*},
    policy_tables::{Flow, Tables},
    router,
    testrun::{PortBed, Run, TC_ACT_REDIRECT, TC_ACT_SHOT, run_tc},
    two_subnets::*,
};

const ACL_ID: u32 = 7;
const SG_1: u16 = 11;
const SG_2: u16 = 12;
/// The connection measured: port 0 (A) to port 2 (B), TCP to 80.
const SPORT: u16 = 40_000;
const DPORT: u16 = 80;
const SINGLE: usize = 5_000;
const ROUNDS: usize = 5;
const NEW_FLOWS: u16 = 10_000;
const CHANGES: usize = 200;

/// A TCP segment from port 0 (A) to port 2 (B) by A's gateway.
fn a_to_b(sport: u16, syn: bool) -> Vec<u8> {
    frames::tcp(
        (pod_mac(0), ip(0), sport),
        (GW_A, ip(2), DPORT),
        syn,
        if syn { b"" } else { &[0; 6] },
    )
}

/// The ACL on A and both groups on port 2, `n` rules each (`policy_tables`).
fn policy_state(n: u32, deny_web: bool, version: u32) -> PolicyState {
    let flow = Flow {
        proto: "tcp",
        to: ip(2).into(),
        port: DPORT,
    };
    Tables::new(n, flow, deny_web).state(version, ACL_ID, [SG_1, SG_2], (VNI_B, ip(2).into()))
}

/// Four Subnet ports on two Subnets (0, 1 in A; 2, 3 in B). With `with_policy`, A's
/// segment names the ACL and port 2 carries PORT_SG (sets written by the caller).
fn bed_on(bed: &PortBed, ports: Dataplane, with_policy: bool) -> Whole {
    let mut dp = Whole::of(ports).expect("writers");
    let here = Ipv4Addr::UNSPECIFIED;
    let mut state = router::state(
        &[SEG_A, SEG_B],
        &(0..4u8)
            .map(|i| (vni(i), ip(i), pod_mac(i), here))
            .collect::<Vec<_>>(),
    );
    if with_policy {
        state.segments.get_mut(&VNI_A).unwrap().acl = ACL_ID;
    }
    dp.sync_router(&state).unwrap();
    for i in 0..4u8 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i as usize),
            vni: vni(i),
            mtu: 0,
            peer: true,
            security_groups: with_policy && i == 2,
            kind: PortKind::Subnet {
                mac: pod_mac(i),
                ip: ip(i).into(),
            },
        })
        .unwrap();
    }
    dp
}

struct Bed {
    bed: PortBed,
    dp: Whole,
}

impl Bed {
    fn new(with_policy: bool) -> Bed {
        let bed = PortBed::new(4);
        let ports = Dataplane::load_sized(None, 65_536).expect("load");
        let mut dp = bed_on(&bed, ports, with_policy);
        if with_policy {
            dp.policy.sync(&policy_state(64, false, 1)).unwrap();
        }
        Bed { bed, dp }
    }

    fn send(&self, frame: &[u8]) -> Run {
        run_tc(
            &self.bed.ns,
            self.dp.l2_port_program(),
            self.bed.ifindex(0),
            frame,
            1,
        )
    }

    fn drops(&self, reason: &str) -> u64 {
        self.dp.drops().unwrap().get(reason).copied().unwrap_or(0)
    }
}

fn ns(run: &Run) -> f64 {
    run.per_run.as_nanos() as f64
}

/// The floor object's `floor_redirect` (one hash lookup, bpf_redirect), port 0 to 2 of
/// `bed`.
fn floor(bed: &PortBed) -> aya::Ebpf {
    let mut floor = EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    HashMap::<_, u32, u32>::try_from(floor.map_mut("jn_floor_fwd").unwrap())
        .unwrap()
        .insert(bed.ifindex(0), bed.ifindex(2), 0)
        .unwrap();
    let prog: &mut SchedClassifier = floor
        .program_mut("floor_redirect")
        .unwrap()
        .try_into()
        .unwrap();
    prog.load().unwrap();
    floor
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

fn program_cost(pol: &Bed, plain: &Bed, out: &mut Vec<Measurement>) {
    let floor_obj = floor(&pol.bed);
    let floor_prog: &SchedClassifier = floor_obj
        .program("floor_redirect")
        .unwrap()
        .try_into()
        .unwrap();
    let floor_run = |f: &[u8]| run_tc(&pol.bed.ns, floor_prog, pol.bed.ifindex(0), f, 1);
    // The connection's first packet on both beds: allowed, its pair written.
    for b in [pol, plain] {
        assert_eq!(b.send(&a_to_b(SPORT, true)).verdict, TC_ACT_REDIRECT, "SYN");
    }
    let [_, egress] = pol.dp.policy.counters(ACL_ID).unwrap();
    assert_eq!(egress.allowed, 1, "the ACL judged the SYN");
    let [sg_in, _] = pol.dp.policy.counters(SG_2 as u32).unwrap();
    let [sg1_in, _] = pol.dp.policy.counters(SG_1 as u32).unwrap();
    assert!(
        sg_in.allowed + sg1_in.allowed >= 1,
        "the groups judged the SYN: {sg_in:?} {sg1_in:?}"
    );
    let established = a_to_b(SPORT, false);
    let (mut p, mut n, mut f) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (mut pp, mut nn, mut ff) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..SINGLE / ROUNDS {
            // Take turns first, so neither side always runs on a cache the other warmed.
            let (a, b) = if (i + round) % 2 == 0 {
                let a = pol.send(&established);
                (a, plain.send(&established))
            } else {
                let b = plain.send(&established);
                (pol.send(&established), b)
            };
            assert_eq!(a.verdict, TC_ACT_REDIRECT, "with policy");
            assert_eq!(a.data[30..34], ip(2), "routed to B");
            assert_eq!(b.verdict, TC_ACT_REDIRECT, "without policy");
            let c = floor_run(&established);
            assert_eq!(c.verdict, TC_ACT_REDIRECT, "floor");
            pp.push(ns(&a));
            nn.push(ns(&b));
            ff.push(ns(&c));
        }
        p.push(median(&mut pp));
        n.push(median(&mut nn));
        f.push(median(&mut ff));
    }
    // Established packets did not ask the rules again.
    let [_, after] = pol.dp.policy.counters(ACL_ID).unwrap();
    assert_eq!(after.allowed, 1, "established packets are not judged again");
    let (p, n, f) = (median(&mut p), median(&mut n), median(&mut f));
    println!("established: policy {p} ns, no policy {n} ns, floor {f} ns");
    out.push(Measurement::new(
        "policy_established_vs_no_policy",
        "ns",
        p,
        ("routed_no_policy", n),
        "goal <= 1.3x; a TCP segment of an established connection from a Subnet A Pod to a Subnet B Pod through port_ingress (gw_route -> gw_forward -> delivery -> deliver_svc), A's segment naming a NetworkACL of 64 rules a direction (one entry each) and the receiving NIC carrying PORT_SG with 2 SecurityGroups of 64 ingress entries each (the connection allowed by the last rule of the ACL's egress and of the second group), vs the same segment on the same four-port bed without ACL or groups; both connections opened by their SYN first; single runs (the router rewrites the frame), taking turns, median of 1,000 per round, median of 5 rounds",
    ));
    out.push(Measurement::new(
        "policy_established_vs_floor",
        "ns",
        p,
        ("floor_redirect_single_run", f),
        &format!(
            "the ceiling of the row above: the same frame through the floor object's floor_redirect (one hash lookup, bpf_redirect) in the same rounds, single runs; the routed path without policy is {:.2}x the floor",
            n / f
        ),
    ));
}

fn new_connections(pol: &Bed, plain: &Bed, out: &mut Vec<Measurement>) {
    let ct_before = |b: &Bed| b.dp.conntrack.entries().unwrap().len();
    let (c0p, c0n) = (ct_before(pol), ct_before(plain));
    let (mut p, mut n) = (Vec::new(), Vec::new());
    for i in 0..NEW_FLOWS {
        let syn = a_to_b(10_000 + i, true);
        let (a, b) = if i % 2 == 0 {
            let a = pol.send(&syn);
            (a, plain.send(&syn))
        } else {
            let b = plain.send(&syn);
            (pol.send(&syn), b)
        };
        assert_eq!(a.verdict, TC_ACT_REDIRECT, "SYN {i} with policy");
        assert_eq!(b.verdict, TC_ACT_REDIRECT, "SYN {i} without policy");
        p.push(ns(&a));
        n.push(ns(&b));
    }
    let (wp, wn) = (ct_before(pol) - c0p, ct_before(plain) - c0n);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mp, mn) = (mean(&p), mean(&n));
    let (p50, n50) = (median(&mut p), median(&mut n));
    let (p99, n99) = (percentile(&mut p, 0.99), percentile(&mut n, 0.99));
    let [_, egress] = pol.dp.policy.counters(ACL_ID).unwrap();
    println!(
        "new: policy {p50} ns (mean {mp:.0}, p99 {p99}), no policy {n50} ns (mean {mn:.0}, p99 {n99}); entries {wp} vs {wn}"
    );
    out.push(Measurement::new(
        "policy_new_connection_ns",
        "ns",
        p50,
        ("new_connection_no_policy", n50),
        &format!(
            "{NEW_FLOWS} SYNs of distinct source ports from port 0 (A) to port 2 (B), single runs taking turns between the bed with the ACL and 2 groups of 64 entries and the bed without; medians (means {mp:.0} vs {mn:.0} ns, p99 {p99:.0} vs {n99:.0}); each allowed SYN judged by the ACL's egress and both groups' ingress (two trie lookups a set) and its connection's entries written (a pair for each side, keyed by the sender's and the receiver's zone): {wp} entries written with policy, {wn} without (ACL egress allowed counter {})",
            egress.allowed
        ),
    ));
    out.push(Measurement::new(
        "conntrack_new_flows_per_s",
        "flows/s",
        1e9 / mp,
        ("new_flows_per_s_no_policy", 1e9 / mn),
        "the row above as a rate on one CPU: 1e9 / mean program time of a new connection's first packet (program time only, as BPF_PROG_TEST_RUN times it: no skb allocation or veth around it), a connection table of 65,536 entries with room",
    ));
}

fn rule_change(pol: &mut Bed, out: &mut Vec<Measurement>) {
    let established = a_to_b(SPORT, false);
    assert_eq!(pol.send(&established).verdict, TC_ACT_REDIRECT);
    let (mut deny, mut allow, mut noop) = (Vec::new(), Vec::new(), Vec::new());
    let mut extra_frames = 0;
    let mut version = 2;
    let enforce = |pol: &mut Bed, want: &PolicyState, verdict: u32, extra: &mut u32| {
        let t = Instant::now();
        pol.dp.policy.sync(want).unwrap();
        let mut tries = 0;
        while pol.send(&established).verdict != verdict {
            tries += 1;
            assert!(tries < 1000, "the change is not enforced");
        }
        *extra += tries;
        t.elapsed().as_secs_f64() * 1e3
    };
    for _ in 0..CHANGES {
        let denied = pol.drops("POLICY_ACL_EGRESS");
        let want = policy_state(64, true, version);
        deny.push(enforce(pol, &want, TC_ACT_SHOT, &mut extra_frames));
        assert_eq!(
            pol.drops("POLICY_ACL_EGRESS"),
            denied + 1,
            "denied by the ACL"
        );
        // The baseline: the same sync with nothing changed, and the frame judged.
        noop.push(enforce(pol, &want, TC_ACT_SHOT, &mut extra_frames));
        version += 1;
        let want = policy_state(64, false, version);
        allow.push(enforce(pol, &want, TC_ACT_REDIRECT, &mut extra_frames));
        version += 1;
    }
    let p50 = median(&mut deny);
    let p99 = percentile(&mut deny, 0.99);
    let worst = deny.iter().copied().fold(0.0, f64::max);
    let a50 = median(&mut allow);
    let a99 = percentile(&mut allow, 0.99);
    let n50 = median(&mut noop);
    let n99 = percentile(&mut noop, 0.99);
    println!(
        "rule change: deny p50 {p50:.3} p99 {p99:.3} ms, allow p50 {a50:.3} p99 {a99:.3}, no-op p50 {n50:.3} p99 {n99:.3}"
    );
    out.push(Measurement::new(
        "policy_rule_change_p99",
        "ms",
        p99,
        ("unchanged_sync_p99", n99),
        &format!(
            "goal < 1,000; {CHANGES} changes of the sender's NetworkACL (64 rules a direction; a deny of TCP 80 to the receiver put first, in place of one rule): from PolicyWriter::sync of the changed set (written under its other slot, header switched, old slot's entries removed, epoch bumped; the two groups unchanged) until a test-run frame of the established connection is dropped as POLICY_ACL_EGRESS; p50 {p50:.3} ms, worst {worst:.3}; the change back (allowed again, the connection re-decided) p50 {a50:.3}, p99 {a99:.3}; the baseline is a sync with nothing changed and one frame (p50 {n50:.3}); frames sent beyond the first after a sync: {extra_frames}. Not in this row: the control plane from the object's update to the daemon's sync (watch, compile)"
        ),
    ));
}

/// A pin root on bpffs for this run, removed when dropped (also on a panic).
struct PinRoot(PathBuf);

impl Drop for PinRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn verifier(out: &mut Vec<Measurement>) {
    let root = PinRoot(PathBuf::from(format!(
        "/sys/fs/bpf/juneau-bench-policy-{}",
        std::process::id()
    )));
    let names = ["gw_route", "gw_forward", "deliver_svc"];
    let counts = |dp: &Dataplane| -> Vec<f64> {
        names
            .iter()
            .map(|n| {
                dp.program(n)
                    .info()
                    .ok()
                    .and_then(|i| i.verified_instruction_count())
                    .unwrap_or(0) as f64
            })
            .collect()
    };
    let bed = PortBed::new(4);
    // Loaded over empty maps; then each load adopts the maps the previous one filled.
    let mut loaded = Vec::new();
    for rules in [0u32, 64, 128] {
        let ports = Dataplane::load(Some(&root.0)).expect("load pinned");
        assert_eq!(ports.adopted(), rules != 0, "adopted the filled maps");
        loaded.push(counts(&ports));
        // An adopted datapath keeps its ports and router: only the writers are taken.
        let mut dp = if rules == 0 {
            bed_on(&bed, ports, true)
        } else {
            Whole::of(ports).expect("writers")
        };
        let next = if rules == 0 { 64 } else { 128 };
        dp.policy.sync(&policy_state(next, false, 1)).unwrap();
        drop(dp);
    }
    println!("verifier: {names:?} at 0/64/128 rules: {loaded:?}");
    let row_names = [
        "verifier_gw_route_policy",
        "verifier_gw_forward",
        "verifier_deliver_svc",
    ];
    let what = [
        "the router's first half (ARP, echo, routing, ICMP errors, the Service stage), tail-calling gw_forward",
        "the router's second half: the sender's side of policy (segment ACL across the gateway, the NIC's groups), then delivery",
        "delivery's tail call at the receiving port: the receiver's side of policy (segment ACL, the NIC's groups), the Services' reply stage",
    ];
    for (i, name) in row_names.iter().enumerate() {
        out.push(Measurement::new(
            name,
            "insns",
            loaded[1][i],
            ("loaded_with_no_rule_sets", loaded[0][i]),
            &format!(
                "goal: independent of the rule count; {} verified instructions of {} loaded over pinned maps holding the ACL and 2 groups of 64 rules each (adopted from the previous load), vs the same program loaded over empty maps; with 128-rule sets {}. A rule set is two trie lookups whatever its size: rules are data, never instructions",
                loaded[1][i], what[i], loaded[2][i]
            ),
        ));
    }
}

fn main() {
    let mut out = Vec::new();
    let mut pol = Bed::new(true);
    let plain = Bed::new(false);
    program_cost(&pol, &plain, &mut out);
    new_connections(&pol, &plain, &mut out);
    rule_change(&mut pol, &mut out);
    drop((pol, plain));
    verifier(&mut out);
    stack::run(&mut out);
    write_part("policy", &out);
}
