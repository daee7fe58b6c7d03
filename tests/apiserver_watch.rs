//! The control plane reads from watch caches (issue 24), counted on a real
//! kube-apiserver's audit log: after start no Juneau component LISTs, whatever churns;
//! a watch that expires (410 Gone) lists again by itself, and the cache converges.
#[path = "common/control_plane.rs"]
mod control_plane;

use std::{
    net::{Shutdown, SocketAddr, TcpListener, TcpStream},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use control_plane::{ControlPlane, Owned};
use juneau::{
    cluster::Cluster,
    store::k8s::{CONTROLLER, KubeCluster, NODE},
};

/// The kinds a component watches: the registry's 19 (`api::kinds`, the three BGP kinds
/// among them) and NetworkEndpoints, Pods, Nodes, Services, EndpointSlices.
const KINDS: u64 = 24;

/// Polls `f` until it holds or `within` passes (then panics with `what`).
fn wait_until(within: Duration, what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pod(name: &str, node: &str, network: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{network}]'\n\
         spec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n---\n"
    )
}

/// NetworkInterface names (`<pod>.<interface>`) with an address, by kubectl.
fn addressed_nics(cp: &ControlPlane) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "networkinterfaces",
        "-n",
        "default",
        "-o",
        "json",
    ]))
    .unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["status"]["address"]
                .as_str()
                .is_some_and(|a| !a.is_empty())
        })
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// What a node daemon's CNI ADD writes for each of its Node's NICs: its endpoint.
fn publish_endpoints(node: &KubeCluster, node_name: &str) -> usize {
    let (world, _) = node.read().unwrap();
    for nic in &world.objects.interfaces {
        let status = nic.status.clone().unwrap_or_default();
        let mut ep = juneau::api::NetworkEndpoint::new(
            nic.metadata.name.as_deref().unwrap(),
            juneau::api::networkendpoint::NetworkEndpointSpec {
                kind: "Pod".into(),
                l2_network: nic.spec.l2_network.clone(),
                subnet: nic.spec.subnet.clone(),
                address: status.address,
                mac_address: "02:00:00:00:00:01".parse().ok(),
                node_name: node_name.into(),
                node_ip: "10.99.0.1".parse().ok(),
                ..Default::default()
            },
        );
        ep.metadata.namespace = Some("default".into());
        node.put_endpoint(ep).unwrap();
    }
    world.objects.interfaces.len()
}

#[test]
fn cp_watch_no_component_lists_after_start_across_a_churn_of_pods_nics_and_endpoints() {
    let cp = ControlPlane::start_audited(&[]);
    cp.install_crds();
    cp.kubectl_ok(&["create", "namespace", "juneau-system"]);
    let out = cp.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-w}\nspec: {}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: w-net}\n\
         spec: {vpc: tenant-w, cidr: 10.73.0.0/24}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: Subnet\nmetadata: {name: w-sub}\n\
         spec: {vpc: tenant-w, cidr: 10.74.0.0/24}\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The controller's log says when one of its watches expired and listed again.
    let log_path = std::env::temp_dir().join(format!("jn-cp-watch-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    let _controller = Owned::spawn(
        std::process::Command::new(env!("CARGO_BIN_EXE_juneau"))
            .args(["controller", "--lease-duration", "120", "--kubeconfig"])
            .arg(&cp.kubeconfig)
            .stderr(log),
    );
    let nodes: Vec<(&str, KubeCluster)> = ["node-a", "node-b"]
        .into_iter()
        .map(|n| {
            (
                n,
                KubeCluster::connect_for_node(Some(&cp.kubeconfig), NODE, n).unwrap(),
            )
        })
        .collect();
    // Started: the controller wrote a first Pod's NIC, every cache holds its first list.
    assert!(
        cp.apply(&pod(
            "first",
            "node-a",
            r#"{"interface": "eth0", "l2Network": "w-net"}"#
        ))
        .status
        .success()
    );
    wait_until(
        Duration::from_secs(30),
        "the controller's first NIC",
        || addressed_nics(&cp).contains(&"first.eth0".to_owned()),
    );
    for (_, n) in &nodes {
        n.read().unwrap();
    }
    let at_start = cp.lists_by("juneau");
    let per_component = |cp: &ControlPlane| {
        [
            cp.lists_by("juneau-controller"),
            cp.lists_by("juneau-node/node-a"),
            cp.lists_by("juneau-node/node-b"),
        ]
    };
    let start_each = per_component(&cp);
    let relists_at_start: Vec<u64> = nodes.iter().map(|(_, n)| n.lists_made()).collect();
    // Every component listed every kind once (the counter counts): KINDS each, and a
    // daemon's probe of the NetworkInterface field selector.
    assert!(at_start >= 3 * KINDS as usize, "{at_start} LISTs at start");

    // The churn: 20 Pods across the two Nodes, on a segment and a Subnet; their NICs,
    // their endpoints (as CNI ADD writes them); then all deleted.
    let mut yaml = String::new();
    for i in 0..20 {
        let node = nodes[i % 2].0;
        let net = if i % 3 == 0 {
            r#"{"interface": "eth0", "subnet": "w-sub"}"#
        } else {
            r#"{"interface": "eth0", "l2Network": "w-net"}"#
        };
        yaml.push_str(&pod(&format!("p{i}"), node, net));
    }
    assert!(cp.apply(&yaml).status.success());
    wait_until(Duration::from_secs(60), "21 addressed NICs", || {
        addressed_nics(&cp).len() == 21
    });
    // Each daemon reads its own Node's NICs only, and publishes their endpoints.
    let mut published = 0;
    for (name, n) in &nodes {
        wait_until(
            Duration::from_secs(10),
            "a daemon's NICs in its cache",
            || {
                let (w, _) = n.read().unwrap();
                w.objects
                    .interfaces
                    .iter()
                    .all(|i| i.spec.node_name == *name)
                    && w.objects.interfaces.len() == if *name == "node-a" { 11 } else { 10 }
            },
        );
        let mine = publish_endpoints(n, name);
        // Read-your-writes: the very next read holds every endpoint just written.
        let (w, _) = n.read().unwrap();
        let shown = w
            .endpoints
            .iter()
            .filter(|e| e.spec.node_name == *name)
            .count();
        assert_eq!(shown, mine, "{name} does not read its own writes");
        published += mine;
    }
    assert_eq!(published, 21);
    // Every Node's endpoints reach every daemon's remote lists.
    for (_, n) in &nodes {
        wait_until(
            Duration::from_secs(10),
            "every endpoint in every daemon",
            || n.read().unwrap().0.endpoints.len() == 21,
        );
    }
    let mut names: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
    names.push("first".into());
    let mut delete = vec![
        "delete",
        "pod",
        "-n",
        "default",
        "--force",
        "--grace-period=0",
    ];
    delete.extend(names.iter().map(String::as_str));
    cp.kubectl_ok(&delete);
    wait_until(Duration::from_secs(60), "every NIC deleted", || {
        addressed_nics(&cp).is_empty()
    });
    for (name, n) in &nodes {
        let (w, _) = n.read().unwrap();
        for ep in &w.endpoints {
            if ep.spec.node_name == *name {
                n.delete_endpoint("default", ep.metadata.name.as_deref().unwrap())
                    .unwrap();
            }
        }
    }
    for (_, n) in &nodes {
        wait_until(
            Duration::from_secs(10),
            "every endpoint gone in every daemon",
            || n.read().unwrap().0.endpoints.is_empty(),
        );
    }
    // No LIST after start but a cache's relist after its watch expired (a 410 Gone:
    // kube-rs lists again only then), which its component counts and logs. On a quiet
    // API server that is none; under load a watch may expire, never more than once a
    // kind here.
    let after = cp.lists_by("juneau");
    let each = per_component(&cp);
    let relisted: Vec<u64> = nodes
        .iter()
        .zip(&relists_at_start)
        .map(|((_, n), at)| n.lists_made() - at)
        .collect();
    let controller_relists = std::fs::read_to_string(&log_path)
        .unwrap_or_default()
        .matches("the watch expired or restarted; listing again")
        .count() as u64;
    let _ = std::fs::remove_file(&log_path);
    let explained = [controller_relists, relisted[0], relisted[1]];
    for (i, who) in ["controller", "node-a", "node-b"].into_iter().enumerate() {
        let listed = (each[i] - start_each[i]) as u64;
        assert_eq!(
            listed, explained[i],
            "{who}: {listed} LISTs after start, {} of them relists of an expired watch",
            explained[i]
        );
        assert!(explained[i] <= KINDS, "{who}: {} relists", explained[i]);
    }
    eprintln!(
        "LISTs after start: {} (relists of expired watches: {explained:?})",
        after - at_start
    );
}

/// A TCP relay on the test's loopback that the test can cut: every connection through
/// it is shut, and new ones are refused, until it is restored.
struct Relay {
    port: u16,
    state: Arc<Mutex<(bool, Vec<TcpStream>)>>,
}

impl Relay {
    fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state: Arc<Mutex<(bool, Vec<TcpStream>)>> = Arc::default();
        let shared = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(down) = conn else { continue };
                let mut s = shared.lock().unwrap();
                if s.0 {
                    continue;
                }
                let Ok(up) = TcpStream::connect(upstream) else {
                    continue;
                };
                s.1.push(down.try_clone().unwrap());
                s.1.push(up.try_clone().unwrap());
                drop(s);
                let (mut up_r, mut down_w) = (up.try_clone().unwrap(), down.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut up_r, &mut down_w);
                    let _ = down_w.shutdown(Shutdown::Both);
                });
                let (mut down_r, mut up_w) = (down, up);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut down_r, &mut up_w);
                    let _ = up_w.shutdown(Shutdown::Both);
                });
            }
        });
        Relay { port, state }
    }

    fn cut(&self) {
        let mut s = self.state.lock().unwrap();
        s.0 = true;
        for c in s.1.drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.state.lock().unwrap().0 = false;
    }
}

fn l2networks(c: &KubeCluster) -> Vec<String> {
    let (w, _) = c.read().unwrap();
    w.objects
        .l2networks
        .iter()
        .map(|l| l.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn l2network(name: &str, cidr: &str) -> String {
    format!(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {{name: {name}}}\n\
         spec: {{vpc: tenant-x, cidr: {cidr}}}\n"
    )
}

#[test]
fn cp_watch_an_expired_watch_lists_again_and_the_cache_converges() {
    // Without the API server's watch cache a watch resumes from etcd, which answers a
    // compacted resourceVersion with 410 Gone.
    let cp = ControlPlane::start_audited(&["--watch-cache=false"]);
    cp.install_crds();
    let vpc = "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-x}\nspec: {}\n---\n";
    assert!(
        cp.apply(&format!("{vpc}{}", l2network("before", "10.75.0.0/24")))
            .status
            .success()
    );
    let relay = Relay::start(cp.server().trim_start_matches("https://").parse().unwrap());
    let kubeconfig = cp.kubeconfig_via("relay", &format!("https://127.0.0.1:{}", relay.port));
    let cluster = KubeCluster::connect(Some(&kubeconfig), CONTROLLER).unwrap();
    assert_eq!(l2networks(&cluster), ["before"]);
    let (lists, audited) = (cluster.lists_made(), cp.lists_by("juneau"));
    assert_eq!(lists, KINDS, "one list per kind at start");
    assert_eq!(audited, KINDS as usize, "the audit log counts the same");

    // Cut: what changes meanwhile is compacted away in etcd.
    relay.cut();
    assert!(
        cp.apply(&l2network("during", "10.76.0.0/24"))
            .status
            .success()
    );
    cp.kubectl_ok(&["delete", "l2network", "before"]);
    cp.compact_etcd();
    relay.restore();
    wait_until(
        Duration::from_secs(60),
        "the cache converges after the cut",
        || l2networks(&cluster) == ["during"],
    );
    // Every kind's watch expired: each lists once more.
    wait_until(Duration::from_secs(60), "every kind listed again", || {
        cluster.lists_made() >= 2 * lists
    });
    std::thread::sleep(Duration::from_secs(1));
    let relisted = cluster.lists_made();
    assert_eq!(relisted, 2 * lists, "one list again per expired watch");
    assert!(
        cp.lists_by("juneau") > audited,
        "the audit log saw no list again"
    );

    // Watching again: a change after it costs no list.
    let settled = cp.lists_by("juneau");
    assert!(
        cp.apply(&l2network("after", "10.77.0.0/24"))
            .status
            .success()
    );
    wait_until(
        Duration::from_secs(10),
        "the change after the relist",
        || l2networks(&cluster) == ["after", "during"],
    );
    assert_eq!(cluster.lists_made(), relisted);
    assert_eq!(cp.lists_by("juneau"), settled);
}
