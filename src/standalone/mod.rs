//! Standalone mode: the whole stack on one machine without a Kubernetes API server.
//!
//! It reads a scenario (Juneau objects, Nodes, Pods), admits the objects with the
//! webhook's rules into the embedded store, runs the controller's reconcilers, serves
//! the store on a local socket, starts one `juneau node` process per Node namespace
//! (supervised as a DaemonSet would be; datapath pinned under
//! /sys/fs/bpf/juneau/<node>), and creates every Pod as a container runtime would: a
//! network namespace, then the real `juneau-cni` binary with the CNI_* environment and
//! the network configuration on stdin. Runs killed before their teardown are cleaned
//! up by the next one ([`cleanup`]).
pub mod cleanup;
mod run;
pub mod supervisor;
pub mod topology;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

use crate::store::Store;

pub use run::{Options, Run, RunningPod};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub description: String,
    pub nodes: Vec<String>,
    /// Juneau objects (Vpc, L2Network, RouteTable, ...), as `kubectl apply` takes them.
    #[serde(default)]
    pub objects: Vec<serde_json::Value>,
    pub pods: Vec<PodDef>,
    /// Pings that must succeed once every Pod is up.
    #[serde(default)]
    pub checks: Vec<Check>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodDef {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub node: String,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Commands run inside the Pod after its network is up (a DHCP server, say), in
    /// the background.
    #[serde(default)]
    pub run: Vec<Vec<String>>,
}

fn default_namespace() -> String {
    "default".into()
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// `from` pings `to` (an address).
    Ping { from: String, to: String },
    /// A command in a Pod that must succeed.
    Exec { pod: String, cmd: Vec<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    #[error("{0}")]
    Scenario(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Topology(#[from] topology::TopologyError),
    #[error(transparent)]
    Dataplane(#[from] crate::node::DataplaneError),
    #[error("{0}")]
    Cni(String),
    #[error("{0}")]
    Daemon(String),
    #[error("check failed: {0}")]
    Check(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

pub fn load(path: &Path) -> Result<Scenario, StandaloneError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| StandaloneError::Scenario(format!("{}: {e}", path.display())))?;
    let s: Scenario = serde_yaml_ng::with::singleton_map_recursive::deserialize(
        serde_yaml_ng::Deserializer::from_str(&text),
    )
    .map_err(|e| StandaloneError::Scenario(format!("{}: {e}", path.display())))?;
    for p in &s.pods {
        if !s.nodes.contains(&p.node) {
            return Err(StandaloneError::Scenario(format!(
                "pod {}: node {:?} is not listed under nodes",
                p.name, p.node
            )));
        }
    }
    Ok(s)
}

/// Where a Node's daemon listens.
pub fn socket_of(node: &str) -> PathBuf {
    Path::new("/run/juneau").join(node).join("cni.sock")
}

/// Where a Node's datapath pins its maps (what `kubectl-juneau --node` reads).
pub fn pin_dir_of(node: &str) -> PathBuf {
    Path::new("/sys/fs/bpf/juneau").join(node)
}

/// A container id: 64 hex digits, like a runtime's.
pub fn container_id(ns: &str, pod: &str) -> String {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = String::new();
    for round in 0..4u64 {
        for b in ns
            .bytes()
            .chain([b'/'])
            .chain(pod.bytes())
            .chain(round.to_be_bytes())
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

/// Runs a scenario; with `once`, tears everything down after the checks, else waits
/// for Ctrl-C (SIGINT / SIGTERM) first.
pub fn run(path: &Path, once: bool, out: &mut dyn FnMut(String)) -> Result<(), StandaloneError> {
    run_with(path, once, DEFAULT_AGING, out)
}

/// L2-30: a learned entry expires after 300 s without a frame.
pub const DEFAULT_AGING: Duration = Duration::from_secs(300);

/// [`run`] with the learning tables' aging time (the daemons sweep every tenth of it,
/// at least once a second).
pub fn run_with(
    path: &Path,
    once: bool,
    aging: Duration,
    out: &mut dyn FnMut(String),
) -> Result<(), StandaloneError> {
    let s = load(path)?;
    if !once {
        // Before any thread starts, so that every thread inherits the mask and the
        // signal reaches `wait_for_signal` instead of killing the process mid-setup.
        block_signals();
    }
    out(format!("standalone: {}", s.description.trim()));
    let opts = Options {
        aging,
        echo_daemon_events: true,
    };
    let mut run = Run::start(&s, &opts, out)?;
    let mut result = Ok(());
    for def in &s.pods {
        match run.add_pod(def) {
            Ok(res) => out(format!(
                "pod {}/{} on {}: CNI ADD -> {}",
                def.namespace,
                def.name,
                def.node,
                res.trim()
            )),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        result = run.start_pod_programs();
    }
    if result.is_ok() {
        run.settle();
        print_state(&run.store, out);
        result = checks(&s.checks, run.pods(), out);
    }
    if result.is_ok() && !once {
        out("running; Ctrl-C tears everything down".into());
        wait_for_signal();
    }
    let down = run.teardown(out);
    result.and(down)
}

/// Empty fields print as `-`, as kubectl does.
/// `namespace/name`, as the tables print namespaced objects.
fn qualified(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn print_state(store: &Store, out: &mut dyn FnMut(String)) {
    let (world, _) = store.read();
    out(format!(
        "{:<16} {:<10} {:<16} {:>5} {:>9} {:<12} {:<17}",
        "L2NETWORK", "VPC", "CIDR", "MTU", "VNI", "GATEWAY", "GATEWAYMAC"
    ));
    for l in &world.objects.l2networks {
        let st = l.status.clone().unwrap_or_default();
        out(format!(
            "{:<16} {:<10} {:<16} {:>5} {:>9} {:<12} {:<17}",
            l.metadata.name.as_deref().unwrap_or(""),
            l.spec.vpc,
            l.spec.cidr.as_deref().unwrap_or("-"),
            st.mtu,
            st.vni,
            or_dash(&st.gateway),
            or_dash(&st.gateway_mac),
        ));
    }
    out(format!(
        "{:<24} {:<8} {:<8} {:<12} {:<18} {:<9}",
        "NETWORKINTERFACE", "NODE", "SUBNET", "L2NETWORK", "ADDRESS", "PHASE"
    ));
    for n in &world.objects.interfaces {
        let st = n.status.clone().unwrap_or_default();
        out(format!(
            "{:<24} {:<8} {:<8} {:<12} {:<18} {:<9}",
            qualified(&n.metadata),
            n.spec.node_name,
            n.spec.subnet.as_deref().unwrap_or("-"),
            n.spec.l2_network.as_deref().unwrap_or("-"),
            or_dash(&st.address),
            st.phase,
        ));
    }
    out(format!(
        "{:<24} {:<8} {:<12} {:<18} {:<17}",
        "NETWORKENDPOINT", "NODE", "L2NETWORK", "ADDRESS", "MAC"
    ));
    for e in &world.endpoints {
        out(format!(
            "{:<24} {:<8} {:<12} {:<18} {:<17}",
            qualified(&e.metadata),
            e.spec.node_name,
            e.spec.l2_network.as_deref().unwrap_or("-"),
            or_dash(&e.spec.address),
            e.spec.mac_address,
        ));
    }
}

fn checks(
    checks: &[Check],
    pods: &[RunningPod],
    out: &mut dyn FnMut(String),
) -> Result<(), StandaloneError> {
    let find = |name: &str| {
        pods.iter().find(|p| p.def.name == name).ok_or_else(|| {
            StandaloneError::Scenario(format!(
                "checks name pod {name:?}, which the scenario does not define"
            ))
        })
    };
    for c in checks {
        match c {
            Check::Ping { from, to } => {
                let r = find(from)?
                    .ns
                    .exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", to]);
                let line = r.as_ref().map(|o| {
                    o.lines()
                        .find(|l| l.contains("transmitted"))
                        .unwrap_or("")
                        .to_owned()
                });
                match line {
                    Ok(l) => out(format!("check: ping {from} -> {to}: {l}")),
                    Err(e) => {
                        return Err(StandaloneError::Check(format!("ping {from} -> {to}: {e}")));
                    }
                }
            }
            Check::Exec { pod, cmd } => {
                let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
                find(pod)?
                    .ns
                    .exec(&argv)
                    .map_err(|e| StandaloneError::Check(format!("{pod}: {e}")))?;
                let mut shown = cmd.join(" ");
                if shown.len() > 80 {
                    shown.truncate(shown.floor_char_boundary(77));
                    shown.push_str("...");
                }
                out(format!("check: {shown} in {pod}: ok"));
            }
        }
    }
    Ok(())
}

fn signals() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set
}

fn block_signals() {
    let _ = signals().thread_block();
}

fn wait_for_signal() {
    let _ = signals().wait();
}
