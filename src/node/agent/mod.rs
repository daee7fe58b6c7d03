//! The node agent: what the daemon does for the CNI plugin (ADD, DEL, CHECK, GC,
//! STATUS), for the other Nodes (remote VTEP lists from NetworkEndpoints), and when it
//! starts (reconciling what it adopted with the cluster).
//!
//! Every call runs on a thread inside the Node's network namespace. ADD is all or
//! nothing: what it made is undone when a later step fails. DEL is idempotent and finds
//! its work by the host veths' aliases, so it needs nothing remembered.
//!
//! The CNI commands are in `cni.rs`, the cluster-to-datapath sync in `sync.rs` (over
//! the Node features of `node::features`), the
//! start-up reconcile in `reconcile.rs`; this file holds the agent and its dispatch.
mod cni;
mod delegate;
mod reconcile;
mod sync;

use std::{
    net::Ipv4Addr,
    sync::{Arc, Mutex, atomic::AtomicU32},
    time::{Duration, Instant},
};

pub use reconcile::ReconcileReport;

use super::{
    Dataplane, DataplaneError,
    coalesce::Coalesced,
    features::Features,
    metrics::Metrics,
    nic,
    veth::{self, PortAlias, PortLink},
};
use crate::{
    api::NetworkInterface,
    cluster::{Cluster, ClusterError, World},
    cni::{CniError, CniResult, Request, code},
    supervisor::{ProcessSpec, Supervisor},
};

/// How long ADD waits for the controller to allocate a Pod's NICs.
const NIC_WAIT: Duration = Duration::from_secs(10);

pub struct Agent {
    pub node: String,
    pub node_ip: Ipv4Addr,
    pub cluster: Arc<dyn Cluster>,
    pub dataplane: Mutex<Dataplane>,
    pub metrics: Metrics,
    /// One sync at a time, from reading the cluster to writing the maps, so that an
    /// older read (a CNI thread) never overwrites a newer one (the sweep); callers
    /// meanwhile are served by the next one.
    syncs: Coalesced<ClusterError>,
    /// What the Node keeps of the rest of the cluster, one feature each.
    features: Features,
    /// The processes the features keep beside the daemon (none today; the BGP
    /// speaker next).
    pub processes: Arc<Supervisor>,
    /// Rounds of gratuitous ARP for an ElasticIP this Node starts answering for (0:
    /// none); the ElasticIP feature reads it.
    pub garp_rounds: Arc<AtomicU32>,
    /// The BGP speaker's folder, when the daemon runs one (`with_bgp_speaker`).
    pub bgp_dir: Option<std::path::PathBuf>,
    /// `--bgp-speaker off`: the BGPNodeState says so.
    pub bgp_off: bool,
    /// How ports attach, read once from the datapath (set before the agent is made), so
    /// that an ADD need not take the datapath's lock to know it.
    port_filters: bool,
    /// The segments the router serves, read without the datapath's lock.
    served: crate::node::dataplane::ServedSegments,
    /// Where each ADD records its container's namespace for the rewritten probes
    /// (`node::probe`); `None`: not recorded.
    netns_records: Option<std::path::PathBuf>,
    /// The threads that write an ADD's NetworkEndpoints while its NICs are plumbed
    /// (`cni.rs`): kept, not made per ADD (a thread made in a burst of Pod starts
    /// waits behind the runtime's cgroup moves and the memory-map lock).
    endpoint_writers: crate::node::workers::Workers,
}

/// Juneau's Pod NIC links in the calling thread's namespace ([`veth::ports`]).
fn port_links(prefix: &str) -> Result<Vec<PortLink>, CniError> {
    veth::ports(prefix).map_err(|e| nic::io("cannot list the Node's links")(e.to_string()))
}

/// The NetworkInterface a port serves.
fn nic_of<'a>(world: &'a World, alias: &PortAlias) -> Option<&'a NetworkInterface> {
    world.objects.interfaces.iter().find(|n| {
        n.metadata.namespace.as_deref() == Some(&alias.namespace)
            && n.spec.pod_ref.name == alias.pod
            && n.spec.interface == alias.interface
    })
}

fn cluster_err(e: ClusterError) -> CniError {
    CniError::new(code::TRY_AGAIN_LATER, "cannot read the cluster").details(e.to_string())
}

impl Agent {
    /// The agent of a loaded datapath; each feature takes its maps' writer from it
    /// here (so a datapath whose writers are taken already is refused).
    pub fn new(
        node: &str,
        node_ip: Ipv4Addr,
        cluster: Arc<dyn Cluster>,
        mut dp: Dataplane,
    ) -> Result<Self, DataplaneError> {
        let garp_rounds = Arc::new(AtomicU32::new(
            crate::features::elasticip::garp::DEFAULT_ROUNDS,
        ));
        let features = Features::new(garp_rounds.clone(), &mut dp)?;
        Ok(Self {
            port_filters: dp.ports_use_filters(),
            served: dp.served_segments(),
            node: node.into(),
            node_ip,
            cluster,
            dataplane: Mutex::new(dp),
            metrics: Metrics::default(),
            syncs: Coalesced::default(),
            features,
            processes: Supervisor::new(Vec::<ProcessSpec>::new(), false),
            garp_rounds,
            bgp_dir: None,
            bgp_off: false,
            netns_records: None,
            endpoint_writers: crate::node::workers::Workers::empty("juneau-ep-write"),
        })
    }

    /// Makes `n` endpoint writers ready before the first burst (the CNI socket's
    /// listener does, beside its handler threads).
    pub fn warm_endpoint_writers(
        &self,
        n: usize,
    ) -> Result<(), crate::node::workers::WorkersError> {
        self.endpoint_writers.warm(n)
    }

    /// Records each ADD's namespace in `dir` (`node::probe`).
    pub fn with_netns_records(mut self, dir: std::path::PathBuf) -> Self {
        self.netns_records = Some(dir);
        self
    }

    /// Adds the BGP speaker's feature, its files in `dir` (the daemon's run folder's
    /// `bgp/`): a cluster without BGPPeers runs no speaker.
    pub fn with_bgp_speaker(
        mut self,
        mode: crate::features::bgp::feature::SpeakerMode,
        dir: std::path::PathBuf,
    ) -> Self {
        self.bgp_dir = Some(dir.clone());
        self.bgp_off = mode == crate::features::bgp::feature::SpeakerMode::Off;
        if self.bgp_off {
            return self;
        }
        self.features
            .push(Box::new(crate::features::bgp::feature::Bgp::new(
                mode,
                self.node_ip,
                dir,
            )));
        self
    }

    /// Starts the processes the features need (once the datapath serves).
    pub fn start_processes(&self) {
        self.features.start(&self.processes, &self.node);
    }

    /// The daemon is leaving: each feature says what its processes do.
    pub fn stop_processes(&self) {
        self.features.stop(&self.processes);
    }

    pub fn handle(&self, req: &Request) -> Result<Option<CniResult>, CniError> {
        let start = Instant::now();
        let sched = nic::Sched::of_this_thread();
        let mut nic_wait = Duration::ZERO;
        let mut parts = nic::AddTimes::default();
        let out = match req.command.as_str() {
            "ADD" => self.add(req).map(|(r, waited, times)| {
                nic_wait = waited;
                parts = times;
                Some(r)
            }),
            "DEL" => self.del(req).map(|()| None),
            "CHECK" => self.check(req).map(|()| None),
            "GC" => self.gc(req).map(|()| None),
            "STATUS" => Ok(None),
            other => Err(CniError::new(
                code::INVALID_ENV,
                format!("unknown CNI_COMMAND {other:?}"),
            )),
        };
        let took = start.elapsed();
        // The whole request's time on a CPU and waiting for one (the rest asleep: the
        // controller, the API server, locks).
        let ran = sched
            .zip(nic::Sched::of_this_thread())
            .map(|(then, now)| now.since(then))
            .unwrap_or_default();
        self.metrics.observe_cni(&req.command, out.is_ok(), took);
        let pod = Self::pod_of(req)
            .map(|(ns, p)| format!("{ns}/{p}"))
            .unwrap_or_default();
        match &out {
            Ok(_) => tracing::info!(
                command = %req.command,
                pod,
                container = %short(&req.container_id),
                ms = took.as_secs_f64() * 1e3,
                nic_wait_ms = nic_wait.as_secs_f64() * 1e3,
                links_ms = parts.ms(nic::Part::Links),
                lock_ms = parts.ms(nic::Part::Lock),
                attach_ms = parts.ms(nic::Part::Attach),
                endpoint_ms = parts.ms(nic::Part::Endpoint),
                session_ms = parts.ms(nic::Part::Session),
                veth_ms = parts.ms(nic::Part::Veth),
                pod_routes_ms = parts.ms(nic::Part::PodRoutes),
                door_ms = parts.ms(nic::Part::Door),
                cpu_ms = ran.cpu_ns as f64 / 1e6,
                runq_ms = ran.runq_ns as f64 / 1e6,
                links_cpu_ms = parts.cpu_ms(nic::Part::Links),
                links_runq_ms = parts.runq_ms(nic::Part::Links),
                "CNI request served"
            ),
            Err(e) => tracing::warn!(
                command = %req.command,
                pod,
                container = %short(&req.container_id),
                ms = took.as_secs_f64() * 1e3,
                error = %e.msg,
                details = %e.details,
                "CNI request failed"
            ),
        }
        out
    }

    fn pod_of(req: &Request) -> Result<(String, String), CniError> {
        match (
            req.args.get("K8S_POD_NAMESPACE"),
            req.args.get("K8S_POD_NAME"),
        ) {
            (Some(ns), Some(name)) => Ok((ns.clone(), name.clone())),
            _ => Err(CniError::new(
                code::INVALID_ENV,
                "CNI_ARGS must carry K8S_POD_NAMESPACE and K8S_POD_NAME",
            )),
        }
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
