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
mod apply;
pub mod cleanup;
pub mod frr;
mod pods;
mod run;
pub mod supervisor;
pub mod topology;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{api::net::shown, store::Store};

pub use pods::{RunningPod, cni};
pub use run::{Options, Run};

use crate::scenario::{Layer, steps};
pub use crate::scenario::{PodDef, Scenario};

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
    #[error(transparent)]
    Daemon(#[from] crate::supervisor::SupervisorError),
    #[error("check failed: {0}")]
    Check(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads a whole-stack scenario (`layer: stack`).
pub fn load(path: &Path) -> Result<Scenario, StandaloneError> {
    let s = Scenario::load(path).map_err(StandaloneError::Scenario)?;
    if s.layer != Layer::Stack {
        return Err(StandaloneError::Scenario(format!(
            "{}: a datapath scenario drives the datapath alone; run it with the harness (cargo test -p juneau-harness --test scenarios)",
            path.display()
        )));
    }
    Ok(s)
}

/// One of the project's binaries, beside the running one (or one folder up: test
/// binaries live in `target/<profile>/deps`).
pub fn sibling_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    let beside = dir.join(name);
    if beside.exists() {
        beside
    } else {
        dir.parent().unwrap_or(dir).join(name)
    }
}

/// Where a Node's daemon listens, and where its datapath pins its maps: the daemon's
/// defaults, which a standalone run keeps.
pub use crate::node::{daemon::socket_of, dataplane::pins::pin_dir_of};

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
        ..Default::default()
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
    // Programs the steps start stay up until the teardown.
    let mut programs = Vec::new();
    if result.is_ok() {
        run.settle();
        print_state(&run.store, out);
        result = run_steps(&s, &mut run, &mut programs, out);
    }
    if result.is_ok() && !once {
        out("running; Ctrl-C tears everything down".into());
        wait_for_signal();
    }
    drop(programs);
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

/// The NATGateways and the Nodes' addresses (NAT-01, NAT-02), when there are any.
fn print_nat(world: &crate::cluster::World, out: &mut dyn FnMut(String)) {
    let ready = |c: &[crate::api::condition::Condition]| {
        c.iter()
            .find(|c| c.type_ == "Ready")
            .map_or("-".to_owned(), |c| format!("{} {}", c.status, c.reason))
    };
    if !world.objects.nat_gateways.is_empty() {
        out(format!(
            "{:<16} {:<10} {:<16} {:>5} {:<24}",
            "NATGATEWAY", "VPC", "EXTERNALNETWORK", "NODES", "READY"
        ));
    }
    for g in &world.objects.nat_gateways {
        let st = g.status.clone().unwrap_or_default();
        out(format!(
            "{:<16} {:<10} {:<16} {:>5} {:<24}",
            g.metadata.name.as_deref().unwrap_or(""),
            g.spec.vpc,
            g.spec.external_network,
            format!("{}/{}", st.ready_nodes, st.nodes),
            ready(&st.conditions),
        ));
    }
    if !world.objects.external_network_attachments.is_empty() {
        out(format!(
            "{:<28} {:<8} {:<16} {:<24}",
            "EXTERNALNETWORKATTACHMENT", "NODE", "ADDRESS", "READY"
        ));
    }
    for a in &world.objects.external_network_attachments {
        let st = a.status.clone().unwrap_or_default();
        out(format!(
            "{:<28} {:<8} {:<16} {:<24}",
            a.metadata.name.as_deref().unwrap_or(""),
            a.spec.node_name,
            or_dash(&shown(&st.assigned_ip)),
            ready(&st.conditions),
        ));
    }
    // NAT-03: the 1:1 mappings, as `kubectl get eipa` prints them.
    if !world.objects.elastic_ip_attachments.is_empty() {
        out(format!(
            "{:<28} {:<16} {:<12} {:<8} {:<9} {:<24}",
            "ELASTICIPATTACHMENT", "EIP", "PODIP", "NODE", "PHASE", "READY"
        ));
    }
    for a in &world.objects.elastic_ip_attachments {
        let st = a.status.clone().unwrap_or_default();
        out(format!(
            "{:<28} {:<16} {:<12} {:<8} {:<9} {:<24}",
            format!(
                "{}/{}",
                a.metadata.namespace.as_deref().unwrap_or("default"),
                a.metadata.name.as_deref().unwrap_or("")
            ),
            or_dash(&shown(&st.elastic_ip)),
            or_dash(&shown(&st.pod_ip)),
            or_dash(&st.node_name),
            or_dash(&st.phase),
            ready(&st.conditions),
        ));
    }
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
            or_dash(&shown(&st.gateway)),
            or_dash(&shown(&st.gateway_mac)),
        ));
    }
    if !world.objects.subnets.is_empty() {
        out(format!(
            "{:<16} {:<10} {:<16} {:>9} {:<12} {:<17}",
            "SUBNET", "VPC", "CIDR", "VNI", "GATEWAY", "GATEWAYMAC"
        ));
    }
    for s in &world.objects.subnets {
        let st = s.status.clone().unwrap_or_default();
        out(format!(
            "{:<16} {:<10} {:<16} {:>9} {:<12} {:<17}",
            s.metadata.name.as_deref().unwrap_or(""),
            s.spec.vpc,
            s.spec.cidr,
            st.vni,
            or_dash(&shown(&st.gateway)),
            or_dash(&shown(&st.gateway_mac)),
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
            or_dash(&shown(&st.address)),
            st.phase,
        ));
    }
    out(format!(
        "{:<24} {:<8} {:<8} {:<12} {:<18} {:<17}",
        "NETWORKENDPOINT", "NODE", "SUBNET", "L2NETWORK", "ADDRESS", "MAC"
    ));
    for e in &world.endpoints {
        out(format!(
            "{:<24} {:<8} {:<8} {:<12} {:<18} {:<17}",
            qualified(&e.metadata),
            e.spec.node_name,
            e.spec.subnet.as_deref().unwrap_or("-"),
            e.spec.l2_network.as_deref().unwrap_or("-"),
            or_dash(&shown(&e.spec.address)),
            shown(&e.spec.mac_address),
        ));
    }
    print_nat(&world, out);
    if world.services.is_empty() {
        return;
    }
    out(format!(
        "{:<24} {:<14} {:<24} {:<30}",
        "SERVICE", "CLUSTER-IP", "PORTS", "ENDPOINTS (ready)"
    ));
    for svc in &world.services {
        let ports: Vec<String> = svc
            .ports
            .iter()
            .map(|p| format!("{}/{}", p.port, p.protocol))
            .collect();
        let ready: Vec<String> = world
            .endpoint_slices
            .iter()
            .filter(|s| s.namespace == svc.namespace && s.service == svc.name)
            .flat_map(|s| {
                let port = s.ports.first().map_or(0, |p| p.port);
                s.endpoints
                    .iter()
                    .filter(|e| e.ready)
                    .flat_map(move |e| e.addresses.iter().map(move |a| format!("{a}:{port}")))
            })
            .collect();
        out(format!(
            "{:<24} {:<14} {:<24} {:<30}",
            svc.key(),
            svc.cluster_ips.join(","),
            ports.join(","),
            if ready.is_empty() {
                "-".into()
            } else {
                ready.join(",")
            },
        ));
    }
}

/// The scenario's steps, in the Pods of the run.
fn run_steps(
    s: &Scenario,
    run: &mut Run,
    programs: &mut Vec<steps::Daemon>,
    out: &mut dyn FnMut(String),
) -> Result<(), StandaloneError> {
    for (n, step) in s.steps.iter().enumerate() {
        let handled =
            steps::run_common(n + 1, step, run, programs, out).map_err(StandaloneError::Check)?;
        if handled {
            continue;
        }
        if let crate::scenario::Step::DeletePod { name } = step {
            run.terminate_pod(name)?;
            run.settle();
            out(format!("  step {}: deleted pod {name}", n + 1));
            continue;
        }
        if let crate::scenario::Step::AddPod { name, node } = step {
            let at = run.add_pod_again(s, name, node.as_deref())?;
            run.settle();
            out(format!("  step {}: added pod {name} on {at}", n + 1));
            continue;
        }
        if let crate::scenario::Step::Apply { object } = step {
            let took = run.apply(object)?;
            out(format!(
                "  step {}: applied {} {}: in every Node's datapath after {:.0} ms",
                n + 1,
                object.get("kind").and_then(|k| k.as_str()).unwrap_or(""),
                object
                    .pointer("/metadata/name")
                    .and_then(|k| k.as_str())
                    .unwrap_or(""),
                took.as_secs_f64() * 1e3
            ));
            continue;
        }
        {
            return Err(StandaloneError::Scenario(format!(
                "step {}: not a step of the stack layer",
                n + 1
            )));
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
    if let Err(e) = signals().thread_block() {
        tracing::warn!(error = %e, "cannot block SIGINT and SIGTERM; a signal may end the run without its teardown");
    }
}

fn wait_for_signal() {
    if let Err(e) = signals().wait() {
        tracing::warn!(error = %e, "cannot wait for SIGINT or SIGTERM; tearing the run down now");
    }
}
