//! A rule change on the standalone stack, from the object's update to every Node's
//! datapath holding it (issue 25: < 1 s): three real `juneau node` daemons reading the
//! run's store, the controller in process. A NetworkACL of 64 rules a direction is
//! updated (one rule's port changed, so the generation moves); polled every 2 ms:
//! - until the controller's status says the new generation as `rulesetVersion`;
//! - until every Node's `jn_pol_set` holds the set at that version (the header the
//!   datapath judges by, written after the entries; the epoch is bumped with it, so
//!   the next packet of every connection is judged by the new rules).
use std::time::{Duration, Instant};

use juneau::{
    api::Object,
    cli::{Filter, node_dir},
    features::policy::cli::dump_policy,
    scenario::Layer,
    standalone::{Options, Run, Scenario},
};
use juneau_harness::bench::Measurement;
use serde_json::{Value, json};

const NODES: [&str; 3] = ["pc-a", "pc-b", "pc-c"];
const ROUNDS: usize = 40;

fn acl(round: usize) -> Value {
    let rules: Vec<Value> = (0..64u32)
        .map(|i| {
            let port = if i == 0 {
                10_000 + round as u32
            } else {
                1000 + i
            };
            json!({"priority": 10 + i, "action": "allow", "protocol": "tcp",
                "cidr": format!("10.95.{}.0/24", i), "ports": [{"port": port}]})
        })
        .collect();
    json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkACL",
        "metadata": {"name": "bench-acl"},
        "spec": {"vpc": "bench", "ingress": rules, "egress": rules}})
}

fn until(started: Instant, done: impl Fn() -> bool) -> f64 {
    let deadline = started + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "not within 10 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    started.elapsed().as_secs_f64() * 1e3
}

fn status_version(run: &Run) -> (String, u32) {
    let (world, _) = run.store.read();
    let a = &world.objects.network_acls[0];
    let s = a.status.clone().unwrap_or_default();
    (s.ruleset_version, s.acl_id)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

pub fn run(out: &mut Vec<Measurement>) {
    let scenario = Scenario {
        description: "rule change propagation".into(),
        layer: Layer::Stack,
        proves: vec!["POL-01".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: NODES.iter().map(|n| n.to_string()).collect(),
        objects: vec![
            json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Vpc",
                "metadata": {"name": "bench"}, "spec": {}}),
            acl(0),
            json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Subnet",
                "metadata": {"name": "bench-a"},
                "spec": {"vpc": "bench", "cidr": "10.95.200.0/24", "networkACL": "bench-acl"}}),
        ],
        pods: Vec::new(),
        outside: juneau::scenario::Outside::None,
    };
    let run = Run::start(&scenario, &Options::default(), &mut |_| {}).expect("start");
    let (mut status, mut nodes) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let obj = Object::from_value(acl(round)).unwrap();
        let started = Instant::now();
        run.store.update(obj).expect("update");
        let want = (round + 1).to_string();
        status.push(until(started, || status_version(&run).0 == want));
        let id = status_version(&run).1;
        let filter = Filter {
            set: Some(id),
            ..Default::default()
        };
        nodes.push(until(started, || {
            NODES.iter().all(|n| {
                dump_policy(&node_dir(n), &filter)
                    .ok()
                    .and_then(|r| r.first().map(|r| r.version.to_string()))
                    == Some(want.clone())
            })
        }));
    }
    let (n50, n99) = (percentile(&mut nodes, 0.5), percentile(&mut nodes, 0.99));
    let (s50, s99) = (percentile(&mut status, 0.5), percentile(&mut status, 0.99));
    println!(
        "rule change on the stack: every Node p50 {n50:.1} p99 {n99:.1} ms; status p50 {s50:.1} p99 {s99:.1} ms"
    );
    out.push(Measurement::new(
        "policy_rule_change_stack_p99",
        "ms",
        n99,
        ("status_ruleset_version_p99", s99),
        &format!(
            "goal < 1,000; {ROUNDS} updates of a NetworkACL of 64 rules a direction (one rule's port changed, so the generation moves) on the standalone stack of 3 Nodes (3 real juneau node daemons, the controller in process): from the store's update until every Node's jn_pol_set holds the set at the new rulesetVersion (the datapath enforces it from then: the epoch moves with the header), p50 {n50:.1} ms; the baseline is the same updates until the controller's status says the new rulesetVersion (p50 {s50:.1} ms), the control plane alone"
        ),
    ));
    run.teardown(&mut |_| {}).unwrap();
}
