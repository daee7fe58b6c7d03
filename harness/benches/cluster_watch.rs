//! The cluster read model on a real kube-apiserver (issue 24): API requests by Juneau's
//! components, counted in the server's audit log, over a churn of Pods created then
//! deleted across the Nodes (NICs on a segment and a Subnet); the convergence of a burst
//! of Pods; the memory of a daemon.
//!
//! Two beds, each on its own API server:
//! - `daemons` (the figures reported): real `juneau node` processes, one per Node
//!   namespace with its datapath, the controller, every Pod added by the real CNI
//!   plugin; convergence from a Pod's CNI ADD to its address seeded in the router of
//!   every Node's datapath; the daemons' resident memory with 1,000 endpoints.
//! - in process (the baseline's bed): each Node is its daemon's read model
//!   (`KubeCluster::connect_for_node`) writing its endpoints as CNI ADD and DEL do,
//!   run once with the watch caches and once with the read model before the change,
//!   which listed every kind after every event and every own write, emulated in front
//!   of the same caches (its LISTs, with the same selectors, before each such read).
//!   The old read model exists only there, so the baseline column is its figures; the
//!   in-process run of today's code stands beside it in the notes, for the bed's share.
//!
//! Scale from `JUNEAU_BENCH_NODES` (20) and `JUNEAU_BENCH_PODS` (500).
#[path = "../../tests/common/control_plane.rs"]
mod control_plane;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use control_plane::ControlPlane;
use juneau::{
    api::{NetworkEndpoint, networkendpoint::NetworkEndpointSpec},
    cluster::{Cluster, ClusterError, World},
    controller,
    store::k8s::{CONTROLLER, KubeCluster, NODE},
};
use juneau_harness::bench::{Measurement, write_part};

#[path = "cluster_watch/daemons.rs"]
mod daemons;
#[path = "cluster_watch/relisting.rs"]
mod relisting;
use relisting::Relisting;

/// First sightings, by (Node, object name): what the convergence is timed from.
type Seen = Arc<Mutex<BTreeMap<(String, String), Instant>>>;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pods_yaml(range: std::ops::Range<usize>, nodes: usize) -> String {
    range
        .map(|i| {
            let net = if i % 4 == 0 {
                r#"{"interface": "eth0", "subnet": "bench-sub"}"#
            } else {
                r#"{"interface": "eth0", "l2Network": "bench-net"}"#
            };
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: default\n  annotations:\n    \
                 juneau.loutres.me/networks: '[{net}]'\n\
                 spec:\n  nodeName: node-{}\n  containers: [{{name: c, image: busybox}}]\n---\n",
                i % nodes
            )
        })
        .collect()
}

/// A Node's daemon as the API sees it: it publishes the endpoint of each of its Node's
/// addressed NICs and deletes the endpoints of NICs gone (what CNI ADD and DEL write),
/// and notes when it first saw each NIC and each endpoint.
fn daemon(node: String, cluster: Arc<dyn Cluster>, seen: Seen, stop: Arc<AtomicBool>) {
    let mut generation = 0;
    while !stop.load(Ordering::Relaxed) {
        let (world, g) = match cluster.read() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{node}: {e}");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let now = Instant::now();
        {
            let mut seen = seen.lock().unwrap();
            for ep in &world.endpoints {
                let name = ep.metadata.name.clone().unwrap_or_default();
                seen.entry((node.clone(), name)).or_insert(now);
            }
            for nic in &world.objects.interfaces {
                if nic.status.as_ref().is_some_and(|s| s.address.is_some()) {
                    let name = format!("nic:{}", nic.metadata.name.as_deref().unwrap_or(""));
                    seen.entry((node.clone(), name)).or_insert(now);
                }
            }
        }
        if let Err(e) = publish(&node, &world, &*cluster) {
            eprintln!("{node}: {e}");
        }
        generation = cluster
            .wait(g.max(generation), Duration::from_millis(500))
            .unwrap_or(g);
    }
}

fn publish(node: &str, world: &World, cluster: &dyn Cluster) -> Result<(), ClusterError> {
    let have: BTreeMap<&str, &NetworkEndpoint> = world
        .endpoints
        .iter()
        .filter(|e| e.spec.node_name == node)
        .map(|e| (e.metadata.name.as_deref().unwrap_or(""), e))
        .collect();
    let mut wanted = Vec::new();
    for nic in &world.objects.interfaces {
        let Some(status) = nic.status.as_ref().filter(|s| s.address.is_some()) else {
            continue;
        };
        let name = nic.metadata.name.clone().unwrap_or_default();
        if !have.contains_key(name.as_str()) {
            let mut ep = NetworkEndpoint::new(
                &name,
                NetworkEndpointSpec {
                    kind: "Pod".into(),
                    l2_network: nic.spec.l2_network.clone(),
                    subnet: nic.spec.subnet.clone(),
                    address: status.address,
                    mac_address: "02:00:00:00:00:01".parse().ok(),
                    node_name: node.into(),
                    node_ip: "10.99.0.1".parse().ok(),
                    ..Default::default()
                },
            );
            ep.metadata.namespace = Some("default".into());
            cluster.put_endpoint(ep)?;
        }
        wanted.push(name);
    }
    for name in have.keys().filter(|n| !wanted.iter().any(|w| w == *n)) {
        cluster.delete_endpoint("default", name)?;
    }
    Ok(())
}

/// What one run measured.
struct Run {
    lists_after_start: usize,
    /// Requests after start by verb, per Pod of the churn.
    per_pod: BTreeMap<String, f64>,
    converge_p99_ms: f64,
    converge_p50_ms: f64,
    daemon_rss_kib: u64,
    endpoints_at_peak: usize,
}

fn wait_until(within: Duration, what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The Vpc, segment and Subnet of both beds.
const NETWORKS: &str = "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: bench}\nspec: {}\n---\n\
     apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: bench-net}\n\
     spec: {vpc: bench, cidr: 10.80.0.0/16}\n---\n\
     apiVersion: juneau.loutres.me/v1alpha1\nkind: Subnet\nmetadata: {name: bench-sub}\n\
     spec: {vpc: bench, cidr: 10.81.0.0/16}\n";

fn run(nodes: usize, pods: usize, burst: usize, relist: bool) -> Run {
    let cp = ControlPlane::start_audited(&[]);
    cp.install_crds();
    let out = cp.apply(NETWORKS);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Seen = Arc::default();
    let connect = |name: &str, node: Option<&str>| -> Arc<dyn Cluster> {
        let c = match node {
            Some(n) => KubeCluster::connect_for_node(Some(&cp.kubeconfig), NODE, n),
            None => KubeCluster::connect(Some(&cp.kubeconfig), CONTROLLER),
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        if relist {
            Arc::new(Relisting::new(c, &cp.kubeconfig, node))
        } else {
            Arc::new(c)
        }
    };
    let ctl = connect("controller", None);
    let mut threads = Vec::new();
    {
        let (ctl, stop) = (ctl.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let cfg = controller::Config {
                default_subnet_cidr: None,
                ..Default::default()
            };
            controller::run_loop(&*ctl, &cfg, &stop);
        }));
    }
    for i in 0..nodes {
        let name = format!("node-{i}");
        let c = connect(&name, Some(&name));
        c.read().expect("a daemon's first read");
        let (seen, stop) = (seen.clone(), stop.clone());
        threads.push(std::thread::spawn(move || daemon(name, c, seen, stop)));
    }
    ctl.read().expect("the controller's first read");
    std::thread::sleep(Duration::from_secs(1));
    let start_events = cp.audit_events().len();

    // The burst: `burst` Pods at once; each one's NIC seen by its Node to its endpoint
    // seen by every Node.
    assert!(cp.apply(&pods_yaml(0..burst, nodes)).status.success());
    let all_seen = |range: std::ops::Range<usize>| {
        let seen = seen.lock().unwrap();
        range.clone().all(|i| {
            (0..nodes).all(|n| seen.contains_key(&(format!("node-{n}"), format!("p{i}.eth0"))))
        })
    };
    wait_until(
        Duration::from_secs(300),
        "the burst's endpoints everywhere",
        || all_seen(0..burst),
    );
    let mut latencies: Vec<f64> = {
        let seen = seen.lock().unwrap();
        (0..burst)
            .map(|i| {
                let nic = seen[&(format!("node-{}", i % nodes), format!("nic:p{i}.eth0"))];
                let last = (0..nodes)
                    .map(|n| seen[&(format!("node-{n}"), format!("p{i}.eth0"))])
                    .max()
                    .unwrap();
                last.duration_since(nic).as_secs_f64() * 1000.0
            })
            .collect()
    };
    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pick =
        |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).min(latencies.len()) - 1];
    // The rest of the churn, then the daemon's memory at the peak.
    if pods > burst {
        assert!(cp.apply(&pods_yaml(burst..pods, nodes)).status.success());
    }
    wait_until(
        Duration::from_secs(600),
        "every endpoint everywhere",
        || all_seen(0..pods),
    );
    let daemon_rss_kib = child_rss(&cp, pods, relist);
    let names: Vec<String> = (0..pods).map(|i| format!("p{i}")).collect();
    for chunk in names.chunks(100) {
        let mut delete = vec![
            "delete",
            "pod",
            "-n",
            "default",
            "--force",
            "--grace-period=0",
            "--wait=false",
        ];
        delete.extend(chunk.iter().map(String::as_str));
        cp.kubectl_ok(&delete);
    }
    wait_until(Duration::from_secs(600), "every endpoint gone", || {
        ctl.read()
            .is_ok_and(|(w, _)| w.endpoints.is_empty() && w.objects.interfaces.is_empty())
    });
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let events = cp.audit_events();
    let mut per_pod: BTreeMap<String, f64> = BTreeMap::new();
    // The components under test; the memory probe's own start is not theirs.
    let ours = |e: &serde_json::Value| {
        e["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("juneau") && !a.ends_with("/node-rss"))
    };
    let after: Vec<&serde_json::Value> = events[start_events.min(events.len())..]
        .iter()
        .filter(|e| ours(e))
        .collect();
    for e in &after {
        *per_pod
            .entry(e["verb"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1.0 / pods as f64;
    }
    let lists_after_start = after.iter().filter(|e| e["verb"] == "list").count();
    // The threads block on the caches' generation for at most half a second.
    for t in threads {
        let _ = t.join();
    }
    Run {
        lists_after_start,
        per_pod,
        converge_p99_ms: pick(0.99),
        converge_p50_ms: pick(0.5),
        daemon_rss_kib,
        endpoints_at_peak: pods,
    }
}

/// The resident memory of a process holding one more daemon's read model, once its
/// caches hold `endpoints` endpoints (this binary again, in its child role).
fn child_rss(cp: &ControlPlane, endpoints: usize, relist: bool) -> u64 {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env("JUNEAU_BENCH_CHILD", &cp.kubeconfig)
        .env("JUNEAU_BENCH_CHILD_ENDPOINTS", endpoints.to_string())
        .env("JUNEAU_BENCH_CHILD_RELIST", if relist { "1" } else { "0" })
        .output()
        .expect("run the daemon child");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("child: {}", String::from_utf8_lossy(&out.stderr)))
}

fn child(kubeconfig: &str) {
    let endpoints: usize = env_or("JUNEAU_BENCH_CHILD_ENDPOINTS", 0);
    let path = std::path::Path::new(kubeconfig);
    let c = KubeCluster::connect_for_node(Some(path), NODE, "node-rss").unwrap();
    let c: Box<dyn Cluster> = if std::env::var("JUNEAU_BENCH_CHILD_RELIST").as_deref() == Ok("1") {
        Box::new(Relisting::new(c, path, Some("node-rss")))
    } else {
        Box::new(c)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.read().unwrap().0.endpoints.len() < endpoints && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap();
    println!("{rss}");
}

fn main() {
    if let Ok(k) = std::env::var("JUNEAU_BENCH_CHILD") {
        return child(&k);
    }
    let nodes = env_or("JUNEAU_BENCH_NODES", 20);
    let pods = env_or("JUNEAU_BENCH_PODS", 500);
    let burst = 100.min(pods);
    let real = daemons::run(nodes, pods, burst, 1000.max(pods));
    let inproc = run(nodes, pods, burst, false);
    let old = run(nodes, pods, burst, true);
    let scale = format!(
        "{nodes} Nodes (real juneau node processes with their datapaths, in their namespaces), the controller, {pods} Pods created by the CNI plugin then deleted; baseline: the relisting read model before the change, in the in-process bed (each Node its read model)"
    );
    let verbs = |r: &Run| {
        r.per_pod
            .iter()
            .map(|(v, n)| format!("{v} {n:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let total = |r: &Run| r.per_pod.values().sum::<f64>();
    let new = &real.run;
    let inproc_note = format!(
        "In-process bed, today's code: {} LISTs, {:.1} req/Pod ({}), p99 {:.0} ms.",
        inproc.lists_after_start,
        total(&inproc),
        verbs(&inproc),
        inproc.converge_p99_ms
    );
    write_part(
        "cluster_watch",
        &[
            Measurement::new(
                "cluster_watch_lists_after_start",
                "LISTs",
                new.lists_after_start as f64,
                (
                    "relisting read model (before)",
                    old.lists_after_start as f64,
                ),
                &format!(
                    "Goal 0. LIST requests by Juneau's components (audit log, by User-Agent) after start, over the churn; {scale}. {inproc_note}"
                ),
            ),
            Measurement::new(
                "cluster_watch_requests_per_pod",
                "req/Pod",
                total(new),
                ("relisting read model (before)", total(&old)),
                &format!(
                    "Every request by Juneau's components after start per Pod of the churn, by verb: {}; before: {}. {scale}. {inproc_note}",
                    verbs(new),
                    verbs(&old)
                ),
            ),
            Measurement::new(
                "cluster_watch_converge_100_p99",
                "ms",
                new.converge_p99_ms,
                ("relisting read model (before)", old.converge_p99_ms),
                &format!(
                    "Goal < 1000. A burst of {burst} Subnet Pods: from each one's CNI ADD returning to its address seeded in jn_gw_nbr of every Node's datapath (pinned maps polled every 5 ms); p50 {:.0} ms. Baseline (in-process bed: the NIC in its Node's cache to the endpoint in every Node's cache) p50 {:.0} ms. {scale}. {inproc_note}",
                    new.converge_p50_ms, old.converge_p50_ms
                ),
            ),
            Measurement::new(
                "cluster_watch_daemon_rss",
                "KiB",
                real.rss_max_kib as f64,
                ("relisting read model (before)", old.daemon_rss_kib as f64),
                &format!(
                    "Resident memory (VmRSS) of the largest of the {nodes} juneau node processes with {} endpoints in the cluster (mean {} KiB); baseline: a process holding the relisting read model alone (no datapath) with {} endpoints.",
                    real.endpoints, real.rss_mean_kib, old.endpoints_at_peak
                ),
            ),
        ],
    );
}
