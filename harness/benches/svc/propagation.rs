//! How fast the cluster's Services reach every Node's maps (SVC-01: < 1 s), on the
//! standalone stack: three real `juneau node` daemons reading the run's store, the
//! controller in process writing the EndpointSlices. Read from the pinned maps of every
//! Node, polled every 2 ms:
//! - a new Service (with a ready backend) until every Node's `jn_svc` holds its
//!   frontend with that backend;
//! - its backend deleted gracefully (terminating first) until every Node's frontend
//!   has none;
//! - beside them, in the same run and through the same watches: a new Pod, from its
//!   admission until every Node's router holds its address (`jn_gw_nbr`), which needs
//!   the controller, the CNI ADD and the endpoint the daemon writes.
use std::time::{Duration, Instant};

use juneau::{
    cli::{Filter, dump_gw_neighbours, dump_services, node_dir},
    scenario::Layer,
    standalone::{Options, PodDef, Run, Scenario},
};
use juneau_harness::bench::{Measurement, median};

const NODES: [&str; 3] = ["pv-a", "pv-b", "pv-c"];
const ROUNDS: usize = 10;

fn pod(name: &str, node: &str, app: &str) -> PodDef {
    PodDef {
        name: name.into(),
        namespace: "default".into(),
        node: node.into(),
        annotations: Default::default(),
        labels: [("app".to_owned(), app.to_owned())].into(),
        ports: Default::default(),
        segment: None,
        addresses: Vec::new(),
        bridge_hosts: Vec::new(),
    }
}

/// Polls until `done` holds on every Node; the time it took.
fn until_every_node(started: Instant, done: impl Fn(&str) -> bool) -> f64 {
    let deadline = started + Duration::from_secs(10);
    while !NODES.iter().all(|n| done(n)) {
        assert!(Instant::now() < deadline, "not on every Node within 10 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    started.elapsed().as_secs_f64() * 1e3
}

fn backends_of(node: &str, ip: &str) -> Option<u32> {
    let filter = Filter {
        addr: Some(ip.parse().unwrap()),
        ..Default::default()
    };
    dump_services(&node_dir(node), &filter)
        .ok()?
        .first()
        .map(|r| r.backends)
}

pub fn run(out: &mut Vec<Measurement>) {
    let scenario = Scenario {
        description: "Service propagation".into(),
        layer: Layer::Stack,
        proves: vec!["SVC-01".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: NODES.iter().map(|n| n.to_string()).collect(),
        objects: Vec::new(),
        pods: Vec::new(),
        outside: juneau::scenario::Outside::None,
    };
    let mut run = Run::start(&scenario, &Options::default(), &mut |_| {}).expect("start");
    let (mut added, mut gone, mut pods) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        // Baseline: a new Pod's address in every Node's router.
        let name = format!("pv-{i}");
        let started = Instant::now();
        run.add_pod(&pod(&name, NODES[i % 3], &name)).unwrap();
        let nic = run.store.interfaces_of("default", &name);
        let ip = nic[0].ip().expect("an allocated NIC").to_string();
        pods.push(until_every_node(started, |n| {
            dump_gw_neighbours(&node_dir(n))
                .map(|rows| rows.iter().any(|r| r.address == ip))
                .unwrap_or(false)
        }));
        // A Service selecting that Pod.
        let cluster_ip = format!("10.96.1.{}", i + 1);
        let started = Instant::now();
        run.store
            .create_service(serde_json::json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name},
                "spec": {"clusterIP": cluster_ip, "selector": {"app": name},
                         "ports": [{"port": 80, "targetPort": 8080}]},
            }))
            .unwrap();
        added.push(until_every_node(started, |n| {
            backends_of(n, &cluster_ip) == Some(1)
        }));
        // Its backend goes (terminating, then deleted): no Node keeps it.
        let started = Instant::now();
        run.store.set_terminating("default", &name);
        gone.push(until_every_node(started, |n| {
            backends_of(n, &cluster_ip) == Some(0)
        }));
        run.delete_pod(&name).unwrap();
    }
    let worst = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    let pod_ms = median(&mut pods.clone());
    out.push(Measurement::new(
        "svc_new_service_to_every_node_ms",
        "ms",
        median(&mut added.clone()),
        ("new_pod_address_to_every_node_router_ms", pod_ms),
        &format!(
            "goal < 1,000 (SVC-01); a new Service with one ready backend, from its write to the store until the frontend with its backend is in jn_svc of all 3 Nodes (3 real juneau node daemons, the controller writing the EndpointSlice), median of {ROUNDS}, worst {:.1} ms; beside it a new Pod from its admission until its address is in every Node's jn_gw_nbr (controller, CNI ADD, endpoint), worst {:.1} ms",
            worst(&added),
            worst(&pods)
        ),
    ));
    out.push(Measurement::new(
        "svc_backend_gone_to_every_node_ms",
        "ms",
        median(&mut gone.clone()),
        ("new_pod_address_to_every_node_router_ms", pod_ms),
        &format!(
            "goal < 1,000 (SVC-01); a Service's only backend marked terminating until no Node's frontend has a backend, median of {ROUNDS}, worst {:.1} ms",
            worst(&gone)
        ),
    ));
    run.teardown(&mut |_| {}).unwrap();
}
