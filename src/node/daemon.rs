//! `juneau node`: the Node daemon a DaemonSet runs, and the one Node bring-up that
//! standalone, the harness and the benchmarks share ([`bring_up`]).
//!
//! Start: find the underlay NIC (by name or pattern; the only interface the daemon
//! attaches to besides its own, MX-02), ensure the VXLAN device, load the programs and
//! adopt what a previous daemon pinned (maps, learned tables, links), attach the
//! overlay and underlay programs, reconcile ports and NetworkEndpoints with the
//! cluster, drop pins of other layout versions, then serve the CNI socket and
//! `/metrics` and run the sweeps (remote lists, aging). Exit (SIGTERM/SIGINT): the
//! programs stay attached through their pinned links, so traffic keeps flowing until
//! the next daemon adopts them.
use std::{
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::{
    Dataplane, DataplaneError,
    agent::Agent,
    dataplane::{
        PortAttach,
        pins::{self, PinLayout},
    },
    netlink::{self, NetlinkError},
    server,
    vxlan::{self, VxlanSpec},
};
use crate::{cluster::Cluster, store::remote::RemoteStore};

/// Name of the VXLAN device the daemon makes.
pub const VXLAN_DEV: &str = "jnvx";
/// Default folder of the CNI socket and the pid file: `<this>/<node>`.
pub const RUN_BASE: &str = "/run/juneau";

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "--underlay {0:?} matches no interface of this Node; name the NIC that carries the overlay (ip link)"
    )]
    NoUnderlay(String),
    #[error("--underlay {pattern:?} matches {found:?}; name one interface or narrow the pattern")]
    AmbiguousUnderlay { pattern: String, found: Vec<String> },
    #[error("the underlay {0} has no IPv4 address to use as the VTEP; give it one or set --vtep")]
    NoVtep(String),
    #[error("cannot reach the cluster: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error(transparent)]
    Dataplane(#[from] DataplaneError),
    #[error(transparent)]
    Link(#[from] NetlinkError),
    #[error(
        "another juneau node serves this Node already (it holds {0}); stop it first, two daemons must never share one datapath"
    )]
    Locked(PathBuf),
    #[error("cannot reconcile the Node's ports: {0}")]
    Reconcile(String),
    #[error(
        "fdb-aging must be at least 1 second (0 would expire every learned MAC at each sweep); the default is 300"
    )]
    FdbAging,
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Io { what, source }
}

/// Everything `juneau node` is told (flags or a config file).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DaemonConfig {
    pub node_name: String,
    /// The underlay NIC: a name, or a pattern with `*` and `?` that must match one.
    pub underlay: String,
    /// This Node's VTEP; default: the underlay's first IPv4 address.
    #[serde(default)]
    pub vtep: Option<Ipv4Addr>,
    /// Pin root of this Node's datapath (maps and links under `v<layout>/`).
    pub pin_dir: PathBuf,
    pub cni_socket: PathBuf,
    /// The standalone run's store socket; without it the daemon reads the Kubernetes
    /// API.
    #[serde(default)]
    pub store_socket: Option<PathBuf>,
    /// The API's kubeconfig; default: `KUBECONFIG`, `~/.kube/config`, or the Pod's
    /// service account (in a DaemonSet).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Seconds without a frame after which a learned MAC expires (L2-30).
    pub fdb_aging: u64,
    /// Where `/metrics` is served; `None` turns it off.
    #[serde(default)]
    pub metrics_addr: Option<SocketAddr>,
    /// Where the kubelet's rewritten probes arrive (loopback); `None`: nowhere.
    #[serde(default)]
    pub probe_addr: Option<SocketAddr>,
    /// Keep the kernel's per-program statistics on while the daemon runs.
    #[serde(default)]
    pub bpf_stats: bool,
    /// Encapsulate known unicast IPv4 in the datapath (else every frame between Nodes
    /// goes by the VXLAN device).
    #[serde(default = "yes")]
    pub datapath_encap: bool,
    /// How ports get their program: `tc` (a filter; fast ADDs) or `tcx`.
    #[serde(default)]
    pub port_attach: PortAttach,
    /// Rounds of gratuitous ARP when this Node starts answering for an ElasticIP; 0
    /// sends none (as the reference).
    #[serde(default = "garp_rounds")]
    pub garp_rounds: u32,
    /// Entries of the connection table: new connections are refused past it
    /// (`CT_FULL`), established ones never evicted.
    #[serde(default = "conntrack_entries")]
    pub conntrack_entries: u32,
    /// Who runs the BGP speaker: the daemon (`supervised`), another container
    /// (`container`, the DaemonSet's `juneau speaker`), or nobody (`off`).
    #[serde(default)]
    pub bgp_speaker: crate::features::bgp::feature::SpeakerMode,
}

fn conntrack_entries() -> u32 {
    juneau_common::ct::DEFAULT_ENTRIES
}

fn garp_rounds() -> u32 {
    crate::features::elasticip::garp::DEFAULT_ROUNDS
}

fn yes() -> bool {
    true
}

impl DaemonConfig {
    /// The pid file beside the CNI socket: how tools find the daemon (and its network
    /// namespace) of a Node.
    pub fn pid_file(&self) -> PathBuf {
        pid_file_of(&self.cni_socket)
    }
}

/// Where `node`'s daemon listens by default (`--cni-socket` overrides it).
pub fn socket_of(node: &str) -> PathBuf {
    Path::new(RUN_BASE).join(node).join("cni.sock")
}

/// `<socket folder>/bgp`: the BGP speaker's files (its configuration, control socket
/// and pid), beside the daemon's own, so that the next daemon finds it.
pub fn bgp_dir_of(cni_socket: &Path) -> PathBuf {
    cni_socket
        .parent()
        .unwrap_or(Path::new(RUN_BASE))
        .join("bgp")
}

/// `<socket folder>/netns`: each Pod container's network namespace file, as its ADD
/// named it (the rewritten probes run there; kept across daemon restarts).
pub fn netns_dir_of(cni_socket: &Path) -> PathBuf {
    cni_socket
        .parent()
        .unwrap_or(Path::new(RUN_BASE))
        .join("netns")
}

/// `<socket folder>/node.pid`.
pub fn pid_file_of(cni_socket: &Path) -> PathBuf {
    cni_socket
        .parent()
        .unwrap_or(Path::new(RUN_BASE))
        .join("node.pid")
}

/// One Node's datapath as every user of it wants it.
#[derive(Clone, Debug)]
pub struct NodeSetup {
    pub underlay: String,
    pub vtep: Ipv4Addr,
    /// MTU of the VXLAN device (the underlay's less 50).
    pub vxlan_mtu: u32,
    pub pin_root: Option<PathBuf>,
    pub datapath_encap: bool,
    pub port_attach: PortAttach,
    /// Entries of the connection table (`jn_ct`) when it is made.
    pub ct_entries: u32,
}

/// Brings up a Node's datapath in the calling thread's namespace: the VXLAN device
/// (kept when it exists), the programs (adopting pins of the same layout), the overlay
/// and underlay attachments. Standalone, the harness and the benchmarks all call this.
pub fn bring_up(setup: &NodeSetup) -> Result<Dataplane, DaemonError> {
    vxlan::ensure(
        None,
        &VxlanSpec {
            name: VXLAN_DEV.into(),
            underlay: setup.underlay.clone(),
            local: setup.vtep,
            mtu: setup.vxlan_mtu,
        },
    )?;
    let mut dp = Dataplane::load_sized(setup.pin_root.as_deref(), setup.ct_entries)?;
    dp.set_port_attach(setup.port_attach);
    dp.attach_overlay(VXLAN_DEV, setup.vtep)?;
    // Attached either way: the uplink's program serves the ElasticIPs too.
    dp.attach_underlay(&setup.underlay)?;
    if !setup.datapath_encap {
        dp.set_own_encap(false)?;
    }
    Ok(dp)
}

/// A `*`/`?` pattern against a name.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob(&pattern[1..], name) || (!name.is_empty() && glob(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => glob(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => glob(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The one interface `pattern` names (MX-02: the daemon attaches to nothing else that
/// it did not make).
pub fn resolve_underlay(pattern: &str) -> Result<String, DaemonError> {
    let found: Vec<String> = netlink::all_links()?
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| glob(pattern.as_bytes(), n.as_bytes()))
        .collect();
    match found.len() {
        0 => Err(DaemonError::NoUnderlay(pattern.to_owned())),
        1 => Ok(found.into_iter().next().expect("one")),
        _ => Err(DaemonError::AmbiguousUnderlay {
            pattern: pattern.to_owned(),
            found,
        }),
    }
}

fn signals() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set
}

/// Runs the daemon in the calling process's network namespace until SIGTERM/SIGINT.
pub fn run(cfg: DaemonConfig) -> Result<(), DaemonError> {
    if cfg.fdb_aging == 0 {
        // The flag refuses 0 itself; a config file reaches here unchecked.
        return Err(DaemonError::FdbAging);
    }
    // Before any thread starts, so that every thread inherits the mask and the signal
    // is taken by the main thread's wait, never by a worker mid-write.
    if let Err(e) = signals().thread_block() {
        tracing::warn!(error = %e, "cannot block SIGTERM; a signal may end the daemon mid-write");
    }
    let started = Instant::now();
    // One daemon per datapath: a second one would hand out the same slots and replace
    // the first one's socket. Held until the process exits.
    let _lock = lock(&cfg)?;
    let cluster: Arc<dyn Cluster> = match &cfg.store_socket {
        Some(p) => Arc::new(RemoteStore::new(p)),
        None => Arc::new(crate::store::k8s::KubeCluster::connect_for_node(
            cfg.kubeconfig.as_deref(),
            crate::store::k8s::NODE,
            &cfg.node_name,
        )?),
    };
    let metrics = match cfg.metrics_addr {
        Some(addr) => Some(
            super::metrics_http::bind(addr)
                .map_err(io(format!("cannot serve metrics on {addr}")))?,
        ),
        None => None,
    };
    let probes = match cfg.probe_addr {
        Some(addr) => {
            Some(super::probe::bind(addr).map_err(io(format!("cannot serve probes on {addr}")))?)
        }
        None => None,
    };
    let underlay = resolve_underlay(&cfg.underlay)?;
    let (underlay_mtu, addrs) = netlink::mtu_and_ipv4(&underlay)?;
    let vtep = match cfg.vtep {
        Some(v) => v,
        None => addrs
            .first()
            .map(|n| n.addr())
            .ok_or_else(|| DaemonError::NoVtep(underlay.clone()))?,
    };
    let _stats = if cfg.bpf_stats {
        match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => Some(fd),
            Err(e) => {
                tracing::warn!(error = %e, "BPF statistics stay off");
                None
            }
        }
    } else {
        None
    };
    let dp = bring_up(&NodeSetup {
        underlay: underlay.clone(),
        vtep,
        vxlan_mtu: underlay_mtu.saturating_sub(juneau_common::overlay::VXLAN_OVERHEAD),
        pin_root: Some(cfg.pin_dir.clone()),
        datapath_encap: cfg.datapath_encap,
        port_attach: cfg.port_attach,
        ct_entries: cfg.conntrack_entries,
    })?;
    let adopted = dp.adopted();
    let layout = dp.pins().cloned().expect("the daemon pins");
    // The kernel applies the larger of `all` and a device's reverse-path setting: with
    // `all` above 0 the direct NICs' veths (set to 0) check anyway, and a secondary
    // ElasticIP NIC's packets, which have no route back, are dropped.
    if let Ok(v) = std::fs::read_to_string("/proc/sys/net/ipv4/conf/all/rp_filter")
        && v.trim() != "0"
    {
        tracing::warn!(
            rp_filter = v.trim(),
            "net.ipv4.conf.all.rp_filter is not 0: packets from secondary ElasticIP NICs will be dropped by the Node; set it to 0"
        );
    }
    let mut dp = dp;
    let mut conntrack = dp.take_conntrack()?;
    // A layout change: the connections of the old layout's table first, while its
    // programs still forward; again once the ports run the new programs (what the old
    // ones made meanwhile), before the old pins go.
    carry_connections(&mut conntrack, &layout);
    let agent = Arc::new(
        Agent::new(&cfg.node_name, vtep, cluster.clone(), dp)?
            .with_bgp_speaker(cfg.bgp_speaker, bgp_dir_of(&cfg.cni_socket))
            .with_netns_records(netns_dir_of(&cfg.cni_socket)),
    );
    agent
        .garp_rounds
        .store(cfg.garp_rounds, std::sync::atomic::Ordering::Relaxed);
    // The router first: ports the reconcile attaches again get their gateway bit.
    agent.sync_from_cluster()?;
    let report = agent
        .reconcile_ports()
        .map_err(|e| DaemonError::Reconcile(format!("{}: {}", e.msg, e.details)))?;
    agent.sync_from_cluster()?;
    carry_connections(&mut conntrack, &layout);
    migrate(&layout)?;
    server::listen(agent.clone(), &cfg.cni_socket)
        .map_err(io(format!("cannot serve {}", cfg.cni_socket.display())))?;
    std::fs::write(cfg.pid_file(), std::process::id().to_string())
        .map_err(io(format!("cannot write {}", cfg.pid_file().display())))?;
    agent.start_processes();
    if let Some(listener) = probes {
        super::probe::serve_on(agent.clone(), listener, netns_dir_of(&cfg.cni_socket))
            .map_err(io("cannot start the probe server"))?;
    }
    if let Some(listener) = metrics {
        super::metrics_http::serve(agent.clone(), listener)
            .map_err(io("cannot start the metrics server"))?;
    }
    tracing::info!(
        node = cfg.node_name,
        underlay,
        %vtep,
        adopted,
        stale_ports = report.stale_ports,
        reattached = report.reattached,
        stale_endpoints = report.stale_endpoints,
        stale_filters = report.stale_filters,
        restored_endpoints = report.restored_endpoints,
        ms = started.elapsed().as_secs_f64() * 1e3,
        socket = %cfg.cni_socket.display(),
        "node daemon ready"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sweeps = super::sweeps::cluster(
        agent.clone(),
        stop.clone(),
        Duration::from_secs(cfg.fdb_aging),
    );
    let ct_sweeps = super::sweeps::conntrack(conntrack, stop.clone());
    let signal = signals().wait();
    tracing::info!(
        ?signal,
        "stopping; the datapath stays attached through its pins"
    );
    stop.store(true, Ordering::Relaxed);
    agent.stop_processes();
    let _ = sweeps.join();
    let _ = ct_sweeps.join();
    let _ = std::fs::remove_file(&cfg.cni_socket);
    let _ = std::fs::remove_file(cfg.pid_file());
    Ok(())
}

/// Takes `<socket folder>/node.lock` (flock, exclusive, not waiting).
fn lock(cfg: &DaemonConfig) -> Result<nix::fcntl::Flock<std::fs::File>, DaemonError> {
    let path = cfg
        .cni_socket
        .parent()
        .unwrap_or(Path::new(RUN_BASE))
        .join("node.lock");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(format!("cannot open {}", path.display())))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| match errno {
            nix::errno::Errno::EWOULDBLOCK => DaemonError::Locked(path.clone()),
            other => io(format!("cannot lock {}", path.display()))(other.into()),
        },
    )
}

/// Copies the connection tables of other layout versions into this one (logged; a
/// failure is logged too and loses only those connections' state, never forwarding).
fn carry_connections(ct: &mut crate::node::dataplane::Conntrack, layout: &PinLayout) {
    for old in layout.other_versions() {
        match ct.migrate_from(&crate::node::dataplane::pins::maps_dir_in(&old)) {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(from = %old.display(), connections = n, "connections carried over from another layout")
            }
            Err(e) => {
                tracing::warn!(from = %old.display(), error = %e, "connections of another layout not carried over")
            }
        }
    }
}

/// Pins of other layout versions: the programs of this version are attached and
/// configured by now (reconcile), so the old links can go; removing them detaches the
/// old programs and frees their maps. Learned MACs of the old tables are relearned.
fn migrate(layout: &PinLayout) -> Result<(), DaemonError> {
    for old in layout.other_versions() {
        tracing::info!(folder = %old.display(), "removing the pins of another layout version");
        pins::remove_tree(&old)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mx_02_underlay_patterns_match_whole_names() {
        assert!(glob(b"eth*", b"eth0"));
        assert!(!glob(b"en?s*", b"enp0s3"));
        assert!(glob(b"en?0s*", b"enp0s3"));
        assert!(glob(b"ul0", b"ul0"));
        assert!(!glob(b"ul0", b"ul01"));
        assert!(!glob(b"eth*", b"veth0"), "a pattern anchors at the start");
    }
}
