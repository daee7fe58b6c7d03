//! Standalone mode: the whole stack on one machine without a Kubernetes API server.
//!
//! It reads a scenario (Juneau objects, Nodes, Pods), admits the objects with the
//! webhook's rules into the embedded store, runs the controller's reconcilers, starts
//! one node daemon per Node (a thread in the Node's namespace serving the CNI socket,
//! with its datapath pinned under /sys/fs/bpf/juneau/<node>), and creates every Pod as
//! a container runtime would: a network namespace, then the real `juneau-cni` binary
//! with the CNI_* environment and the network configuration on stdin.
pub mod topology;

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use serde::Deserialize;

use crate::{
    controller::{self, Config},
    netns::{self, Owned},
    node::{Dataplane, agent::Agent, server},
    store::{Object, PodRecord, Store},
};

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
    #[error("check failed: {0}")]
    Check(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

pub fn load(path: &Path) -> Result<Scenario, StandaloneError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| StandaloneError::Scenario(format!("{}: {e}", path.display())))?;
    let s: Scenario = serde_yaml::with::singleton_map_recursive::deserialize(
        serde_yaml::Deserializer::from_str(&text),
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
fn container_id(ns: &str, pod: &str) -> String {
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

struct RunningPod {
    def: PodDef,
    cid: String,
    ns: Owned,
    node: String,
}

fn cni_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.with_file_name("juneau-cni")
}

/// Invokes the real CNI binary as a container runtime would.
fn cni(command: &str, pod: &RunningPod, ifname: &str) -> Result<String, StandaloneError> {
    let conf = serde_json::json!({
        "cniVersion": crate::cni::VERSION,
        "name": "juneau",
        "type": "juneau-cni",
        "socket": socket_of(&pod.node),
    });
    let mut child = Command::new(cni_binary())
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", &pod.cid)
        .env("CNI_NETNS", pod.ns.path())
        .env("CNI_IFNAME", ifname)
        .env("CNI_PATH", cni_binary().parent().unwrap_or(Path::new("/")))
        .env(
            "CNI_ARGS",
            format!(
                "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={}",
                pod.def.namespace, pod.def.name
            ),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| {
            StandaloneError::Cni(format!(
                "cannot run {}: {e} (build it with cargo build)",
                cni_binary().display()
            ))
        })?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(conf.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(StandaloneError::Cni(format!(
            "CNI {command} of {}/{}: {}",
            pod.def.namespace,
            pod.def.name,
            stdout.trim()
        )))
    }
}

/// Keeps every agent's remote lists in step with the store, and ages its tables.
fn background(agent: Arc<Agent>, stop: Arc<AtomicBool>, aging: Duration) {
    std::thread::spawn(move || {
        let mut seen = 0;
        let mut last_sweep = std::time::Instant::now();
        while !stop.load(Ordering::Relaxed) {
            seen = agent.store.wait(seen, Duration::from_millis(500));
            agent.sync_remotes();
            if last_sweep.elapsed() >= (aging / 10).max(Duration::from_secs(1)) {
                let _ = agent.dataplane.lock().expect("dataplane lock").age(aging);
                last_sweep = std::time::Instant::now();
            }
        }
    });
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
    let store = Store::new();
    store.write(|w| w.objects.service_cidrs.push("10.96.0.0/12".into()));
    for v in &s.objects {
        let obj = Object::from_value(v.clone())?;
        store.create(obj)?;
    }
    for p in &s.pods {
        store.create_pod(PodRecord {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            node: p.node.clone(),
            annotations: p.annotations.clone(),
            dns_policy: String::new(),
        })?;
    }
    let cfg = Config::default();
    while controller::run_once(&store, &cfg) {}
    for n in &s.nodes {
        if std::os::unix::net::UnixStream::connect(socket_of(n)).is_ok() {
            return Err(StandaloneError::Scenario(format!(
                "another standalone run is serving Node {n:?} ({}); stop it first (Ctrl-C)",
                socket_of(n).display()
            )));
        }
    }

    let prefix = format!("jn-sa-{}", std::process::id());
    let topo = topology::Topology::new(&prefix, &s.nodes)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut agents = Vec::new();
    for n in &topo.nodes {
        let pin = pin_dir_of(&n.name);
        let _ = std::fs::remove_dir_all(&pin);
        let agent = netns::run_in(n.ns.path(), || -> Result<Arc<Agent>, StandaloneError> {
            let mut dp = Dataplane::load(Some(&pin))?;
            dp.attach_overlay(topology::VXLAN_DEV, n.ip)?;
            dp.attach_underlay(topology::UNDERLAY_DEV)?;
            let agent = Arc::new(Agent::new(&n.name, n.ip, store.clone(), dp));
            server::listen(agent.clone(), &socket_of(&n.name))?;
            Ok(agent)
        })
        .map_err(|e| StandaloneError::Scenario(e.to_string()))??;
        background(agent.clone(), stop.clone(), aging);
        out(format!(
            "node {}: namespace {}, VTEP {}, daemon on {}",
            n.name,
            n.ns.name(),
            n.ip,
            socket_of(&n.name).display()
        ));
        agents.push(agent);
    }

    let mut pods = Vec::new();
    let mut result = Ok(());
    for def in s.pods {
        let ns = Owned::create(&format!("{prefix}-{}-{}", def.namespace, def.name))?;
        let pod = RunningPod {
            cid: container_id(&def.namespace, &def.name),
            node: def.node.clone(),
            ns,
            def,
        };
        match cni("ADD", &pod, "eth0") {
            Ok(res) => out(format!(
                "pod {}/{} on {}: CNI ADD -> {}",
                pod.def.namespace,
                pod.def.name,
                pod.node,
                res.trim()
            )),
            Err(e) => {
                result = Err(e);
                pods.push(pod);
                break;
            }
        }
        pods.push(pod);
    }
    let mut daemons = Vec::new();
    if result.is_ok() {
        for p in &pods {
            for cmd in &p.def.run {
                let child = Command::new("ip")
                    .args(["netns", "exec", p.ns.name()])
                    .args(cmd)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()?;
                daemons.push(child);
            }
        }
        std::thread::sleep(Duration::from_millis(if daemons.is_empty() {
            100
        } else {
            500
        }));
        // Every Node has seen every endpoint before the checks start.
        for a in &agents {
            a.sync_remotes();
        }
        print_state(&store, out);
        result = checks(&s.checks, &pods, out);
    }
    if result.is_ok() && !once {
        out("running; Ctrl-C tears everything down".into());
        wait_for_signal();
    }
    for mut d in daemons {
        let _ = d.kill();
        let _ = d.wait();
    }
    for p in pods.iter().rev() {
        if let Err(e) = cni("DEL", p, "eth0") {
            out(format!("teardown: {e}"));
        }
        store.delete_pod(&p.def.namespace, &p.def.name);
    }
    stop.store(true, Ordering::Relaxed);
    drop(pods);
    drop(agents);
    for n in &topo.nodes {
        if let Some(dir) = socket_of(&n.name).parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
        let _ = std::fs::remove_dir_all(pin_dir_of(&n.name));
    }
    drop(topo);
    result
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
