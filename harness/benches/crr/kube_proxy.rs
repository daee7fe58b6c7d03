//! kube-proxy as a baseline (issue 42): built from the Kubernetes module tree in
//! `tools/k8s` (`tools/build.sh k8s`), run in nftables mode in a Node namespace of
//! the bench's own, against a real kube-apiserver (etcd, the test control plane)
//! reached through a relay into that namespace. The Service and its EndpointSlice are
//! written to the API as a cluster's controllers would; kube-proxy programs the Node's
//! nftables from them. The Node routes its Pods by plain veths and /32 routes (the
//! Pods' gateway 169.254.1.1 on every host veth), so what a connection costs beyond
//! the kernel's own forwarding is kube-proxy's DNAT and conntrack.
//!
//! No packet leaves the bench's namespaces and no machine-wide setting changes:
//! kube-proxy's conntrack settings are left as they are by its flags
//! (`--conntrack-max-per-core=0` and the timeouts 0), forwarding is the Node
//! namespace's own sysctl, and its metrics and health ports are its defaults in that
//! namespace. etcd and the API server listen on the loopback of the bench process's
//! namespace, as the tests' control plane does; kube-proxy reaches them through a relay.
use std::{
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use juneau_harness::{Netns, bench::plain_pods};

use super::control_plane::{ControlPlane, Owned, tool};

/// The Service's ClusterIP, in the test control plane's range (10.0.0.0/24).
pub const CLUSTER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 50);
const NODE: &str = "kp-node";

/// Pod `i`'s address: the client is 0, the backends 1-3.
fn pod_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 244, 0, 10 + i as u8)
}

/// A running kube-proxy bed. Fields drop in order: kube-proxy first, then the
/// namespaces, then the control plane.
pub struct Bed {
    _proxy: Owned,
    pub node: Netns,
    pub pods: Vec<Netns>,
    _cp: ControlPlane,
    log: PathBuf,
}

impl Bed {
    /// The client's namespace.
    pub fn client(&self) -> &Path {
        self.pods[0].path()
    }

    /// The backends' namespaces.
    pub fn backends(&self) -> impl Iterator<Item = &Path> {
        self.pods[1..].iter().map(|p| p.path())
    }

    /// The backends by their own addresses, at `port`.
    pub fn direct(&self, port: u16) -> Vec<SocketAddr> {
        (1..self.pods.len())
            .map(|i| SocketAddr::from((pod_ip(i), port)))
            .collect()
    }

    /// kube-proxy's version line, for the bench's note.
    pub fn version() -> String {
        let out = Command::new(tool("k8s", "kube-proxy"))
            .arg("--version")
            .output()
            .expect("run kube-proxy --version");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The last lines of kube-proxy's log (removed with the bed).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

fn sh(ns: &Netns, cmd: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sh", "-c", cmd])
        .output()
        .expect("run in the namespace");
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The bed: a client and 3 backends on one Node, a Service of `port` to `target` on
/// the 3 backends, kube-proxy's rules for it in place.
pub fn start(port: u16, target: u16) -> Bed {
    let binary = tool("k8s", "kube-proxy");
    let cp = ControlPlane::start();
    let (node, pods) = plain_pods(4);
    sh(&node, "sysctl -qw net.ipv4.ip_forward=1");
    for (i, pod) in pods.iter().enumerate() {
        let ip = pod_ip(i);
        sh(&node, &format!("ip addr add 169.254.1.1/32 dev h{i}"));
        sh(&node, &format!("ip route add {ip}/32 dev h{i}"));
        sh(pod, "ip link set lo up");
        sh(pod, &format!("ip addr add {ip}/32 dev eth0"));
        sh(pod, "ip route add 169.254.1.1/32 dev eth0");
        sh(pod, "ip route add default via 169.254.1.1 dev eth0");
    }
    let endpoints: Vec<String> = (1..pods.len())
        .map(|i| {
            format!(
                "{{addresses: [\"{}\"], conditions: {{ready: true}}, nodeName: {NODE}}}",
                pod_ip(i)
            )
        })
        .collect();
    let objects = format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\nstatus:\n  addresses: [{{type: InternalIP, address: 10.99.7.1}}]\n---\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: crr\n  namespace: default\nspec:\n  clusterIP: {CLUSTER_IP}\n  \
         ports: [{{name: http, port: {port}, targetPort: {target}, protocol: TCP}}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: crr-bench\n  namespace: default\n  \
         labels: {{kubernetes.io/service-name: crr, endpointslice.kubernetes.io/managed-by: juneau-bench}}\n\
         addressType: IPv4\nports: [{{name: http, port: {target}, protocol: TCP}}]\nendpoints: [{}]\n",
        endpoints.join(", ")
    );
    let applied = cp.apply(&objects);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let upstream: SocketAddr = cp
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("the API server's address");
    let relay = super::relay::relay_into(node.path(), upstream);
    let kubeconfig = cp.kubeconfig_via("kube-proxy", &format!("https://127.0.0.1:{relay}"));
    let log = std::env::temp_dir().join(format!("juneau-kube-proxy-{}.log", std::process::id()));
    let out = std::fs::File::create(&log).expect("kube-proxy's log");
    let proxy = Owned::spawn(
        Command::new("ip")
            .args(["netns", "exec", node.name()])
            .arg(&binary)
            .args([
                "--proxy-mode=nftables",
                &format!("--kubeconfig={}", kubeconfig.display()),
                &format!("--hostname-override={NODE}"),
                "--cluster-cidr=10.244.0.0/16",
                "--conntrack-max-per-core=0",
                "--conntrack-tcp-timeout-established=0",
                "--conntrack-tcp-timeout-close-wait=0",
                "--conntrack-udp-timeout=0",
                "--conntrack-udp-timeout-stream=0",
                "--v=2",
            ])
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out)),
    );
    let bed = Bed {
        _proxy: proxy,
        node,
        pods,
        _cp: cp,
        log,
    };
    // Until its rules hold the Service (its first sync).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rules = Command::new("ip")
            .args(["netns", "exec", bed.node.name(), "nft", "list", "ruleset"])
            .output()
            .expect("nft list ruleset");
        let text = String::from_utf8_lossy(&rules.stdout);
        if text.contains(&CLUSTER_IP.to_string()) && text.contains(&pod_ip(3).to_string()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kube-proxy wrote no rule for {CLUSTER_IP} within 60 s:\n{}",
            bed.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    bed
}
