//! The issue's own bed: `nodes` real `juneau node` processes, each in its Node
//! namespace on one underlay (the standalone topology), each with its datapath pinned,
//! reading the real kube-apiserver through its watch caches; the controller in
//! process; every Pod created as a runtime would (a namespace, then the real
//! `juneau-cni` binary against its Node's daemon, which writes the endpoint).
//!
//! Convergence is read from the datapaths themselves: a Subnet Pod's endpoint is
//! converged when its address is a seeded neighbour in `jn_gw_nbr` of every Node
//! (the router seeds every endpoint of a gateway segment on every Node), timed from
//! its CNI ADD's return.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use aya::maps::{HashMap as BpfHashMap, Map, MapData};
use juneau::{
    api::{NetworkEndpoint, networkendpoint::NetworkEndpointSpec},
    cluster::Cluster,
    controller,
    netns::Owned,
    node::dataplane::PinLayout,
    standalone::{
        PodDef, RunningPod, cni, container_id, pin_dir_of, socket_of,
        supervisor::{DaemonSpec, Supervisor},
        topology::{self, Topology},
    },
    store::k8s::{CONTROLLER, KubeCluster},
};
use juneau_common::{NbrEntry, NbrKey, map_names};

use super::{ControlPlane, Run, wait_until};

/// The API server's port, from the kubeconfig (`https://127.0.0.1:<port>`).
fn api_port(kubeconfig: &std::path::Path) -> u16 {
    let text = std::fs::read_to_string(kubeconfig).expect("the kubeconfig");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .and_then(|u| u.rsplit(':').next()?.trim_end_matches('/').parse().ok())
        .expect("the API server's port")
}

/// The API server inside a Node namespace: a listener on the namespace's own loopback
/// (same address and port, so the kubeconfig and the server's certificate hold),
/// each connection copied to the server on this process's loopback. The listener
/// belongs to the namespace it was made in; nothing crosses any other interface.
fn relay_api_into(ns: &std::path::Path, port: u16, stop: Arc<AtomicBool>) {
    let listener = juneau::netns::run_in(ns, || std::net::TcpListener::bind(("127.0.0.1", port)))
        .expect("enter the Node namespace")
        .expect("listen on the Node namespace's loopback");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let inside = match listener.accept() {
                Ok((c, _)) => c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(_) => break,
            };
            inside
                .set_nonblocking(false)
                .expect("a blocking connection");
            let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            let (mut a, mut b) = (inside.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut a, &mut b);
                let _ = b.shutdown(std::net::Shutdown::Write);
            });
            let (mut a, mut b) = (server, inside);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut a, &mut b);
                let _ = b.shutdown(std::net::Shutdown::Write);
            });
        }
    });
}

/// Node names unique on the machine (their sockets and pins are by name).
fn node_names(nodes: usize) -> Vec<String> {
    let tag = std::process::id() % 100_000;
    (0..nodes).map(|i| format!("cw{tag}-{i}")).collect()
}

fn pod_yaml(i: usize, node: &str, subnet: bool) -> String {
    let net = if subnet {
        r#"{"interface": "eth0", "subnet": "bench-sub"}"#
    } else {
        r#"{"interface": "eth0", "l2Network": "bench-net"}"#
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{net}]'\n\
         spec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n---\n"
    )
}

/// Each Node's seeded neighbours (by address), first seen when.
type Sightings = Arc<Mutex<Vec<BTreeMap<Ipv4Addr, Instant>>>>;

/// Polls every Node's `jn_gw_nbr` (pinned) until `stop`.
fn watch_neighbours(pins: Vec<PathBuf>, seen: Sightings, stop: Arc<AtomicBool>) {
    let mut maps: Vec<Option<BpfHashMap<MapData, NbrKey, NbrEntry>>> =
        pins.iter().map(|_| None).collect();
    while !stop.load(Ordering::Relaxed) {
        for (n, path) in pins.iter().enumerate() {
            if maps[n].is_none() {
                maps[n] = MapData::from_pin(path)
                    .ok()
                    .and_then(|d| BpfHashMap::try_from(Map::HashMap(d)).ok());
            }
            let Some(map) = &maps[n] else { continue };
            let now = Instant::now();
            let ips: Vec<Ipv4Addr> = map
                .keys()
                .filter_map(Result::ok)
                .map(|k| Ipv4Addr::from(k.ip.to_ne_bytes()))
                .collect();
            let mut seen = seen.lock().unwrap();
            for ip in ips {
                seen[n].entry(ip).or_insert(now);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The address a CNI result gives eth0.
fn address_of(result: &str) -> Ipv4Addr {
    let v: serde_json::Value = serde_json::from_str(result).expect("a CNI result");
    v["ips"][0]["address"]
        .as_str()
        .and_then(|a| a.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {result}"))
}

/// Runs CNI `command` for `pods` on 8 threads; returns each ADD's address and return
/// time.
fn cni_all(command: &str, pods: &[RunningPod]) -> Vec<(Ipv4Addr, Instant)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = Mutex::new(vec![(Ipv4Addr::UNSPECIFIED, Instant::now()); pods.len()]);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(pod) = pods.get(i) else { break };
                    let mut tries = 0;
                    let result = loop {
                        match cni(command, pod, "eth0") {
                            Ok(r) => break r,
                            Err(e) if tries < 20 => {
                                tries += 1;
                                eprintln!("{} {}: {e}; again", command, pod.def.name);
                                std::thread::sleep(Duration::from_millis(250));
                            }
                            Err(e) => panic!("{command} {}: {e}", pod.def.name),
                        }
                    };
                    let done = Instant::now();
                    if command == "ADD" {
                        out.lock().unwrap()[i] = (address_of(&result), done);
                    }
                }
            });
        }
    });
    out.into_inner().unwrap()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

pub struct DaemonsRun {
    pub run: Run,
    /// Resident memory of the daemons with `endpoints` endpoints: (max, mean) KiB.
    pub rss_max_kib: u64,
    pub rss_mean_kib: u64,
    pub endpoints: usize,
}

/// Removes what the run made on the machine by name, also when it fails.
struct Cleanup {
    names: Vec<String>,
    daemons: Option<Arc<Supervisor>>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(d) = &self.daemons {
            d.shutdown();
        }
        for n in &self.names {
            if let Some(dir) = socket_of(n).parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
            // Removing the pins detaches the programs and frees the maps.
            let _ = std::fs::remove_dir_all(pin_dir_of(n));
        }
    }
}

/// The churn of `pods` Pods (the first `burst` at once, all on the Subnet), then
/// `memory_endpoints` endpoints in all for the memory reading.
pub fn run(nodes: usize, pods: usize, burst: usize, memory_endpoints: usize) -> DaemonsRun {
    let cp = ControlPlane::start_audited(&[]);
    cp.install_crds();
    assert!(cp.apply(super::NETWORKS).status.success());
    let names = node_names(nodes);
    let mut cleanup = Cleanup {
        names: names.clone(),
        daemons: None,
    };
    let prefix = format!("jn-cw-{}", std::process::id());
    let topo = Topology::new(&prefix, &names).expect("the Node namespaces");
    let stop = Arc::new(AtomicBool::new(false));
    let ctl: Arc<dyn Cluster> =
        Arc::new(KubeCluster::connect(Some(&cp.kubeconfig), CONTROLLER).expect("controller"));
    let controller = {
        let (ctl, stop) = (ctl.clone(), stop.clone());
        std::thread::spawn(move || {
            let cfg = controller::Config {
                default_subnet_cidr: None,
                ..Default::default()
            };
            controller::run_loop(&*ctl, &cfg, &stop);
        })
    };
    let port = api_port(&cp.kubeconfig);
    for n in &topo.nodes {
        // Their loopback is down in a fresh namespace.
        n.ns.exec(&["ip", "link", "set", "lo", "up"])
            .expect("lo up");
        relay_api_into(n.ns.path(), port, stop.clone());
    }
    let specs: Vec<DaemonSpec> = topo
        .nodes
        .iter()
        .map(|n| {
            let _ = std::fs::remove_dir_all(pin_dir_of(&n.name));
            DaemonSpec {
                node: n.name.clone(),
                netns: n.ns.path().to_owned(),
                args: [
                    "--node-name",
                    &n.name,
                    "--underlay",
                    topology::UNDERLAY_DEV,
                    "--vtep",
                    &n.ip.to_string(),
                    "--pin-dir",
                    &pin_dir_of(&n.name).display().to_string(),
                    "--cni-socket",
                    &socket_of(&n.name).display().to_string(),
                    "--kubeconfig",
                    &cp.kubeconfig.display().to_string(),
                    "--metrics-addr",
                    "off",
                    "--garp-rounds",
                    "0",
                ]
                .map(String::from)
                .to_vec(),
                log: std::env::temp_dir().join(format!("{}.log", n.name)),
                pid_file: juneau::node::daemon::pid_file_of(&socket_of(&n.name)),
            }
        })
        .collect();
    let daemons = Supervisor::new(specs, false);
    cleanup.daemons = Some(daemons.clone());
    let pids: Vec<u32> = names
        .iter()
        .map(|n| {
            daemons
                .start(n, Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("{n}: {e}"))
        })
        .collect();
    ctl.read().expect("the controller's first read");
    std::thread::sleep(Duration::from_secs(2));
    let start_events = cp.audit_events().len();

    let pins: Vec<PathBuf> = names
        .iter()
        .map(|n| {
            PinLayout::new(&pin_dir_of(n))
                .maps_dir()
                .join(map_names::GW_NBR)
        })
        .collect();
    let seen: Sightings = Arc::new(Mutex::new(vec![BTreeMap::new(); nodes]));
    let watcher = {
        let (seen, stop) = (seen.clone(), stop.clone());
        std::thread::spawn(move || watch_neighbours(pins, seen, stop))
    };

    let make = |range: std::ops::Range<usize>, subnet: &dyn Fn(usize) -> bool| {
        let yaml: String = range
            .clone()
            .map(|i| pod_yaml(i, &names[i % nodes], subnet(i)))
            .collect();
        assert!(cp.apply(&yaml).status.success());
        range
            .map(|i| {
                let def = PodDef {
                    name: format!("p{i}"),
                    namespace: "default".into(),
                    node: names[i % nodes].clone(),
                    annotations: Default::default(),
                    labels: Default::default(),
                    ports: Default::default(),
                    segment: None,
                    addresses: Vec::new(),
                    bridge_hosts: Vec::new(),
                };
                let ns = Owned::create(&format!("{prefix}-p{i}")).expect("a Pod namespace");
                RunningPod {
                    cid: container_id("default", &def.name),
                    def,
                    ns,
                }
            })
            .collect::<Vec<_>>()
    };

    // The burst: every Pod on the Subnet, so each endpoint is a neighbour everywhere.
    let mut running = make(0..burst, &|_| true);
    let added = cni_all("ADD", &running);
    let converged = |ip: &Ipv4Addr| seen.lock().unwrap().iter().all(|n| n.contains_key(ip));
    wait_until(
        Duration::from_secs(300),
        "the burst's neighbours on every Node",
        || added.iter().all(|(ip, _)| converged(ip)),
    );
    let mut latencies: Vec<f64> = {
        let seen = seen.lock().unwrap();
        added
            .iter()
            .map(|(ip, t0)| {
                let last = seen.iter().map(|n| n[ip]).max().unwrap();
                last.saturating_duration_since(*t0).as_secs_f64() * 1000.0
            })
            .collect()
    };
    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pick =
        |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).min(latencies.len()) - 1];

    // The rest of the churn: a Subnet Pod in four, the others on the segment.
    if pods > burst {
        let rest = make(burst..pods, &|i| i % 4 == 0);
        cni_all("ADD", &rest);
        running.extend(rest);
    }
    // The memory reading at `memory_endpoints` endpoints: the rest are another Node's
    // (one without a daemon), on the Subnet, so that every daemon seeds them.
    let extra = memory_endpoints.saturating_sub(pods);
    for i in 0..extra {
        let mut ep = NetworkEndpoint::new(
            &format!("far-{i}"),
            NetworkEndpointSpec {
                kind: "Pod".into(),
                subnet: Some("bench-sub".into()),
                address: Some(
                    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 81, 128, 0)) + i as u32).into(),
                ),
                mac_address: "02:00:00:00:00:02".parse().ok(),
                node_name: "cw-far".into(),
                node_ip: "10.99.1.1".parse().ok(),
                ..Default::default()
            },
        );
        ep.metadata.namespace = Some("default".into());
        ctl.put_endpoint(ep).expect("an endpoint of the far Node");
    }
    let subnet_endpoints = (0..pods).filter(|i| *i < burst || i % 4 == 0).count() + extra;
    wait_until(
        Duration::from_secs(300),
        "every Subnet endpoint a neighbour on every Node",
        || {
            seen.lock()
                .unwrap()
                .iter()
                .all(|n| n.len() >= subnet_endpoints)
        },
    );
    std::thread::sleep(Duration::from_secs(2));
    let rss: Vec<u64> = pids.iter().map(|p| rss_kib(*p)).collect();
    for i in 0..extra {
        ctl.delete_endpoint("default", &format!("far-{i}"))
            .expect("delete an endpoint of the far Node");
    }
    // Deletion as a runtime does it: CNI DEL, then the Pod object goes.
    cni_all("DEL", &running);
    let pod_names: Vec<String> = (0..pods).map(|i| format!("p{i}")).collect();
    for chunk in pod_names.chunks(100) {
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
    let _ = watcher.join();
    let _ = controller.join();
    let events = cp.audit_events();
    drop(cleanup);
    drop(running);
    drop(topo);

    // Every juneau component: the controller and the daemons (juneau-node/<node>);
    // the bench's own writes of the far endpoints go by the controller's client and
    // are taken out below.
    let after: Vec<&serde_json::Value> = events[start_events.min(events.len())..]
        .iter()
        .filter(|e| {
            e["userAgent"]
                .as_str()
                .is_some_and(|a| a.starts_with("juneau"))
        })
        .filter(|e| {
            !e["objectRef"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("far-"))
        })
        .collect();
    let mut per_pod: BTreeMap<String, f64> = BTreeMap::new();
    for e in &after {
        *per_pod
            .entry(e["verb"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1.0 / pods as f64;
    }
    let lists_after_start = after.iter().filter(|e| e["verb"] == "list").count();
    let agents: BTreeSet<&str> = after
        .iter()
        .filter_map(|e| e["userAgent"].as_str())
        .collect();
    eprintln!(
        "cluster_watch (daemons): {} requests after start from {} clients",
        after.len(),
        agents.len()
    );
    DaemonsRun {
        run: Run {
            lists_after_start,
            per_pod,
            converge_p99_ms: pick(0.99),
            converge_p50_ms: pick(0.5),
            daemon_rss_kib: rss.iter().copied().max().unwrap_or(0),
            endpoints_at_peak: pods + extra,
        },
        rss_max_kib: rss.iter().copied().max().unwrap_or(0),
        rss_mean_kib: rss.iter().sum::<u64>() / rss.len().max(1) as u64,
        endpoints: pods + extra,
    }
}
