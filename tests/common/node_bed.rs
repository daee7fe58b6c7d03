//! One Node of the Kubernetes testbed: a `juneau node` in a Node namespace of a
//! `Topology`, reading the test's API server through a relay on the namespace's
//! loopback as the `juneau-node` ServiceAccount, with its pins and files removed with
//! it; and what the testbed's tests share around it.
#![allow(dead_code)]
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use juneau::standalone::topology::{Topology, UNDERLAY_DEV};

use crate::{
    control_plane::{ControlPlane, Owned},
    relay,
};

/// A token of ServiceAccount `account` (namespace juneau-system).
pub fn as_account(cp: &ControlPlane, account: &str) -> String {
    cp.kubectl_ok(&["create", "token", account, "-n", "juneau-system"])
        .trim()
        .to_owned()
}

/// Polls `f` until it gives a value or `within` passes (then panics with `what`).
pub fn wait_for<T>(within: Duration, what: impl Fn() -> String, f: impl Fn() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The test's folder, removed however the test ends (declared first, dropped last).
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(path: PathBuf) -> TestDir {
        std::fs::create_dir_all(&path).unwrap();
        TestDir(path)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One Node: its daemon (killed with the test) and where its files are.
pub struct NodeDaemon {
    pub socket: PathBuf,
    pub log: PathBuf,
    pub pins: PathBuf,
    child: Option<Owned>,
}

impl NodeDaemon {
    /// The daemon's process (a benchmark reads its CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.0.id())
    }
}

impl Drop for NodeDaemon {
    fn drop(&mut self) {
        // The daemon first (it could still be pinning), then its pins: they keep
        // programs and maps after it, and a test's go with it.
        drop(self.child.take());
        let _ = juneau::node::dataplane::pins::remove_tree(&self.pins);
    }
}

/// Starts `node`'s daemon in its namespace of `topo`, files under `dir/<node>`, pins
/// under `/sys/fs/bpf/<pin_prefix>-<pid>-<node>`; returns once its CNI socket is open.
pub fn start_node(
    cp: &ControlPlane,
    topo: &Topology,
    node: &str,
    dir: &Path,
    pin_prefix: &str,
) -> NodeDaemon {
    let ns = &topo.nodes.iter().find(|n| n.name == node).unwrap().ns;
    let upstream = cp.server().trim_start_matches("https://").parse().unwrap();
    let port = relay::relay_into(ns.path(), upstream);
    let kubeconfig = cp.kubeconfig_for_token_via(
        &format!("juneau-node-{node}"),
        &as_account(cp, "juneau-node"),
        &format!("https://127.0.0.1:{port}"),
    );
    // The daemon's lock sits beside its socket: one folder per Node.
    let own = dir.join(node);
    std::fs::create_dir_all(&own).unwrap();
    let socket = own.join("cni.sock");
    let log = own.join("daemon.log");
    let pins = PathBuf::from(format!(
        "/sys/fs/bpf/{pin_prefix}-{}-{node}",
        std::process::id()
    ));
    let child = Owned::spawn(
        Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(juneau::standalone::sibling_binary("juneau"))
            .args(["node", "--node-name", node, "--underlay", UNDERLAY_DEV])
            // The kubelet's rewritten probes (each daemon in its Node's namespace).
            .args(["--probe-addr", "127.0.0.1:9465"])
            .args(["--metrics-addr", "off", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--cni-socket")
            .arg(&socket)
            .arg("--pin-dir")
            .arg(&pins)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap()),
    );
    // The guard first: its pins go even when the daemon never comes up.
    let daemon = NodeDaemon {
        socket,
        log,
        pins,
        child: Some(child),
    };
    wait_for(
        Duration::from_secs(60),
        || {
            format!(
                "{node}'s daemon did not open its CNI socket: {}",
                std::fs::read_to_string(&daemon.log).unwrap_or_default()
            )
        },
        || daemon.socket.exists().then_some(()),
    );
    daemon
}
