//! The node agent: what the daemon does for the CNI plugin (ADD, DEL, CHECK, GC,
//! STATUS), for the other Nodes (remote VTEP lists from NetworkEndpoints), and when it
//! starts (reconciling what it adopted with the cluster).
//!
//! Every call runs on a thread inside the Node's network namespace. ADD is all or
//! nothing: what it made is undone when a later step fails. DEL is idempotent and finds
//! its work by the host veths' aliases, so it needs nothing remembered.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use super::{
    Dataplane,
    coalesce::Coalesced,
    gateway,
    metrics::Metrics,
    netlink,
    nic::{self, Made, NicContext},
    veth::{self, PortAlias},
};
use crate::{
    api::{NetworkEndpoint, NetworkInterface, networkendpoint::NetworkEndpointSpec},
    cluster::Cluster,
    cni::{CniError, CniResult, Request, code},
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
    syncs: Coalesced<crate::cluster::ClusterError>,
    /// Objects the router left out, each logged once.
    router_skips: Mutex<BTreeSet<String>>,
    /// Rounds of gratuitous ARP for an ElasticIP this Node starts answering for (0:
    /// none), and the addresses it answers for now.
    pub garp_rounds: std::sync::atomic::AtomicU32,
    answering: Mutex<BTreeSet<Ipv4Addr>>,
    /// How ports attach, read once from the datapath (set before the agent is made), so
    /// that an ADD need not take the datapath's lock to know it.
    port_filters: bool,
}

/// A host-side port link of this Node: (name, ifindex, what its alias says).
type PortLink = (String, u32, PortAlias);

/// Juneau's Pod NIC links in the calling thread's namespace.
fn port_links(prefix: &str) -> Result<Vec<PortLink>, CniError> {
    Ok(netlink::links_with_alias(prefix)
        .map_err(|e| nic::io("cannot list the Node's links")(e.to_string()))?
        .into_iter()
        .filter_map(|(name, ifindex, alias)| Some((name, ifindex, PortAlias::parse(&alias)?)))
        .collect())
}

/// The NetworkInterface a port serves.
fn nic_of<'a>(world: &'a crate::cluster::World, alias: &PortAlias) -> Option<&'a NetworkInterface> {
    world.objects.interfaces.iter().find(|n| {
        n.metadata.namespace.as_deref() == Some(&alias.namespace)
            && n.spec.pod_ref.name == alias.pod
            && n.spec.interface == alias.interface
    })
}

fn cluster_err(e: crate::cluster::ClusterError) -> CniError {
    CniError::new(code::TRY_AGAIN_LATER, "cannot read the cluster").details(e.to_string())
}

impl Agent {
    pub fn new(node: &str, node_ip: Ipv4Addr, cluster: Arc<dyn Cluster>, dp: Dataplane) -> Self {
        Self {
            port_filters: dp.ports_use_filters(),
            node: node.into(),
            node_ip,
            cluster,
            dataplane: Mutex::new(dp),
            metrics: Metrics::default(),
            syncs: Coalesced::default(),
            router_skips: Mutex::new(BTreeSet::new()),
            garp_rounds: super::garp::DEFAULT_ROUNDS.into(),
            answering: Mutex::new(BTreeSet::new()),
        }
    }

    pub fn handle(&self, req: &Request) -> Result<Option<CniResult>, CniError> {
        let start = Instant::now();
        let out = match req.command.as_str() {
            "ADD" => self.add(req).map(Some),
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

    /// The Pod's NICs once the controller allocated all of them.
    fn wait_for_nics(&self, ns: &str, pod: &str) -> Result<Vec<NetworkInterface>, CniError> {
        let deadline = Instant::now() + NIC_WAIT;
        let mut seen = 0;
        loop {
            let nics = self.cluster.interfaces_of(ns, pod).map_err(cluster_err)?;
            if let Some(failed) = nics
                .iter()
                .find(|n| n.status.as_ref().is_some_and(|s| s.phase == "Failed"))
            {
                let why = failed
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.first())
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                return Err(CniError::new(
                    code::INVALID_CONFIG,
                    format!(
                        "NetworkInterface {ns}/{} cannot be set up: {why}",
                        failed.metadata.name.as_deref().unwrap_or("")
                    ),
                ));
            }
            let ready = !nics.is_empty()
                && nics
                    .iter()
                    .all(|n| n.status.as_ref().is_some_and(|s| s.phase == "Allocated"));
            if ready {
                return Ok(nics);
            }
            if Instant::now() >= deadline {
                return Err(CniError::new(
                    code::TRY_AGAIN_LATER,
                    format!(
                        "the NICs of Pod {ns}/{pod} are not allocated yet; the kubelet will retry"
                    ),
                ));
            }
            seen = self
                .cluster
                .wait(seen, Duration::from_millis(200))
                .map_err(cluster_err)?;
        }
    }

    fn context<'a>(&'a self, req: &'a Request, ns: &'a str, pod: &'a str) -> NicContext<'a> {
        NicContext {
            container_id: &req.container_id,
            netns: Path::new(&req.netns),
            namespace: ns,
            pod,
            node: &self.node,
            node_ip: self.node_ip,
            dataplane: &self.dataplane,
            port_filters: self.port_filters,
        }
    }

    fn add(&self, req: &Request) -> Result<CniResult, CniError> {
        let (ns, pod) = Self::pod_of(req)?;
        let nics = self.wait_for_nics(&ns, &pod)?;
        if self.router_lacks_a_segment_of(&nics)
            && let Err(e) = self.sync_from_cluster()
        {
            tracing::warn!(error = %e, "router not synced before ADD");
        }
        let drivers = nics
            .iter()
            .map(nic::driver_for)
            .collect::<Result<Vec<_>, _>>()?;
        let ctx = self.context(req, &ns, &pod);
        // One netlink session (the Node's and the Pod's connections) for the whole ADD.
        let nl = netlink::Session::open(Some(Path::new(&req.netns)))
            .map_err(|e| nic::io("cannot open netlink to the Node and the Pod")(e.to_string()))?;
        let mut made = Made::default();
        let mut endpoints = Vec::new();
        let mut result = CniResult {
            cni_version: crate::cni::VERSION.into(),
            dns: serde_json::json!({}),
            ..Default::default()
        };
        for (nic, driver) in nics.iter().zip(drivers) {
            let step = driver
                .setup(&ctx, &nl, nic, &mut made, &mut result)
                .and_then(|()| {
                    let ep = self.endpoint_for(&ns, &pod, &req.container_id, nic);
                    let name = ep.metadata.name.clone().unwrap_or_default();
                    self.cluster.put_endpoint(ep).map_err(cluster_err)?;
                    endpoints.push(name);
                    Ok(())
                });
            if let Err(e) = step {
                self.undo(made, &ns, endpoints);
                return Err(e);
            }
        }
        Ok(result)
    }

    /// True unless the router serves the segment of every NIC (a direct ElasticIP
    /// NIC needs none): a port of a gateway segment must get the gateway bit from its
    /// first frame, and whether a segment the router does not serve has a gateway is
    /// the cluster's to say, so such an ADD syncs first. ADDs on served segments skip
    /// that sync (a hundred at once each waited for one); the sync after the answer
    /// still seeds the new NIC's neighbour entry.
    fn router_lacks_a_segment_of(&self, nics: &[NetworkInterface]) -> bool {
        let dp = self.dataplane.lock().expect("dataplane lock");
        nics.iter().any(|n| {
            let vni = n.status.as_ref().map_or(0, |s| s.vni);
            n.spec.elastic_ip.is_none() && !dp.router_knows(vni)
        })
    }

    /// The NetworkEndpoint `<pod>.<iface>` that tells other Nodes where a NIC lives.
    fn endpoint_for(
        &self,
        ns: &str,
        pod: &str,
        container_id: &str,
        nic: &NetworkInterface,
    ) -> NetworkEndpoint {
        let status = nic.status.clone().unwrap_or_default();
        let iface = &nic.spec.interface;
        let mut ep = NetworkEndpoint::new(
            &format!("{pod}.{iface}"),
            NetworkEndpointSpec {
                kind: "Pod".into(),
                subnet: nic.spec.subnet.clone(),
                l2_network: nic.spec.l2_network.clone(),
                elastic_ip: nic.spec.elastic_ip.clone(),
                address: status.address,
                mac_address: crate::format_mac(&nic::nic_mac(container_id, iface)),
                node_name: self.node.clone(),
                node_ip: self.node_ip.to_string(),
            },
        );
        ep.metadata.namespace = Some(ns.to_owned());
        ep
    }

    /// Undoes a partial ADD, in reverse order; errors are logged, never stop it.
    fn undo(&self, made: Made, ns: &str, endpoints: Vec<String>) {
        let mut dp = self.dataplane.lock().expect("dataplane lock");
        for ifindex in made.ports.into_iter().rev() {
            if let Err(e) = dp.remove_port(ifindex) {
                tracing::warn!(ifindex, error = %e, "rollback: port");
            }
        }
        drop(dp);
        for link in made.links.into_iter().rev() {
            if let Err(e) = veth::delete(None, &link) {
                tracing::warn!(link, error = %e, "rollback: veth");
            }
        }
        for name in endpoints {
            if let Err(e) = self.cluster.delete_endpoint(ns, &name) {
                tracing::warn!(endpoint = name, error = %e, "rollback: endpoint");
            }
        }
    }

    /// Removes every NIC of the container; succeeds when there is nothing left to do.
    fn del(&self, req: &Request) -> Result<(), CniError> {
        let links = port_links(&PortAlias::container_prefix(&req.container_id))?;
        let mut result = self.remove_nics(links, "DEL");
        // A sandbox deleted before DEL took the veths with it: what the datapath and the
        // cluster still hold of them goes now.
        self.prune_stale_ports();
        if let Ok((ns, pod)) = Self::pod_of(req)
            && let Err(e) = self.delete_endpoints_of(&ns, &pod, &req.container_id)
        {
            result = Err(e);
        }
        result
    }

    /// Every NIC of the Pod exists, is attached, and has its address.
    fn check(&self, req: &Request) -> Result<(), CniError> {
        let (ns, pod) = Self::pod_of(req)?;
        let links = port_links(&PortAlias::container_prefix(&req.container_id))?;
        let ctx = self.context(req, &ns, &pod);
        for nic in self.cluster.interfaces_of(&ns, &pod).map_err(cluster_err)? {
            let host = links
                .iter()
                .find(|(_, _, a)| a.interface == nic.spec.interface)
                .map(|(n, i, _)| (n.as_str(), *i));
            nic::driver_for(&nic)?.check(&ctx, &nic, host)?;
        }
        Ok(())
    }

    /// Removes the attachments of containers that are not in the valid list.
    fn gc(&self, req: &Request) -> Result<(), CniError> {
        let valid = req.config.valid_attachments.clone().unwrap_or_default();
        let stale: Vec<PortLink> = port_links(&format!("{}:", veth::OWNER_ALIAS))?
            .into_iter()
            .filter(|(name, _, alias)| {
                let keep = valid
                    .iter()
                    .any(|a| a.container_id == alias.container_id && a.ifname == alias.interface);
                if !keep {
                    tracing::info!(nic = %alias.nic(), host = name, "GC: removing a stale attachment");
                }
                !keep
            })
            .collect();
        self.remove_nics(stale, "GC")
    }

    /// Removes the ports whose interface is gone; returns how many.
    fn prune_stale_ports(&self) -> usize {
        let live: BTreeSet<u32> = match port_links(&format!("{}:", veth::OWNER_ALIAS)) {
            Ok(links) => links.iter().map(|(_, i, _)| *i).collect(),
            Err(e) => {
                tracing::warn!(error = %e.msg, "cannot list the Node's links; stale ports stay");
                return 0;
            }
        };
        let mut dp = self.dataplane.lock().expect("dataplane lock");
        let mut removed = 0;
        for ifindex in dp.ports() {
            if !live.contains(&ifindex) {
                match dp.remove_port(ifindex) {
                    Ok(()) => removed += 1,
                    Err(e) => tracing::warn!(ifindex, error = %e, "cannot remove a stale port"),
                }
            }
        }
        removed
    }

    /// Deletes this Node's NetworkEndpoints of the Pod's NICs made for `container_id`
    /// (their MAC is derived from it, so a newer sandbox's endpoints stay).
    fn delete_endpoints_of(&self, ns: &str, pod: &str, container_id: &str) -> Result<(), CniError> {
        let (world, _) = self.cluster.read().map_err(cluster_err)?;
        let prefix = format!("{pod}.");
        for ep in world.endpoints.iter().filter(|e| {
            e.spec.node_name == self.node && e.metadata.namespace.as_deref() == Some(ns)
        }) {
            let name = ep.metadata.name.as_deref().unwrap_or("");
            let Some(iface) = name.strip_prefix(&prefix) else {
                continue;
            };
            if ep.spec.mac_address == crate::format_mac(&nic::nic_mac(container_id, iface)) {
                self.cluster
                    .delete_endpoint(ns, name)
                    .map_err(cluster_err)?;
            }
        }
        Ok(())
    }

    /// Tears down NICs found by their host links (their driver's teardown, then their
    /// NetworkEndpoint); every error is collected, none stops the rest.
    fn remove_nics(&self, links: Vec<PortLink>, what: &str) -> Result<(), CniError> {
        let mut errors = Vec::new();
        for (name, ifindex, alias) in links {
            errors.extend(nic::driver_for_port(&alias).teardown(
                &self.dataplane,
                &name,
                ifindex,
                &alias,
            ));
            let ep = format!("{}.{}", alias.pod, alias.interface);
            if let Err(e) = self.cluster.delete_endpoint(&alias.namespace, &ep) {
                errors.push(e.to_string());
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(
                CniError::new(code::IO_FAILURE, format!("{what} left something behind"))
                    .details(errors.join("; ")),
            )
        }
    }

    /// Brings the datapath's view of the rest of the cluster in line with it: the
    /// remote VTEP lists and the router (gateway segments, RouteTables, neighbours).
    /// Returns once a sync that read the cluster after this call has been written
    /// (before a CNI ADD configures ports, so that a port of a gateway segment enters
    /// the router from its first frame; after every request; on every change). Callers
    /// meanwhile share one sync ([`Coalesced`]).
    pub fn sync_from_cluster(&self) -> Result<(), crate::cluster::ClusterError> {
        self.syncs.run(|| {
            let (world, _) = self.cluster.read()?;
            self.sync_router_with(&world);
            self.sync_elastic_ips(&world);
            self.sync_remotes(&world).map(drop)
        })
    }

    /// Every direct ElasticIP's holder, and the addresses this Node advertises.
    fn sync_elastic_ips(&self, world: &crate::cluster::World) {
        let holders = super::elasticip::holders(world);
        let mut dp = self.dataplane.lock().expect("dataplane lock");
        match dp.set_elastic_ips(&holders) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                changed = n,
                held = holders.len(),
                "ElasticIP holders synced"
            ),
            Err(e) => tracing::error!(error = %e, "cannot write the ElasticIP holders"),
        }
        let uplink = match dp.uplink() {
            Ok(uplink) => uplink,
            Err(e) => {
                // The answers written stay: better than none until the MAC reads again.
                tracing::error!(error = %e, "cannot read the uplink's MAC; ElasticIP ARP answers left as they are");
                return;
            }
        };
        let answers = uplink
            .map(|(_, mac)| super::elasticip::arp_answers(world, &self.node, mac))
            .unwrap_or_default();
        match dp.set_arp_answers(&answers) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                changed = n,
                answered = answers.len(),
                "ElasticIP ARP answers synced"
            ),
            Err(e) => {
                tracing::error!(error = %e, "cannot write the ElasticIP ARP answers");
                return;
            }
        }
        // What this Node answers for from now on is announced (★ EIP-11).
        let now: BTreeSet<Ipv4Addr> = answers.keys().copied().collect();
        let new: Vec<Ipv4Addr> = {
            let mut before = self.answering.lock().expect("answering lock");
            let new = now.difference(&before).copied().collect();
            *before = now;
            new
        };
        let rounds = self.garp_rounds.load(std::sync::atomic::Ordering::Relaxed);
        if let Some((ifindex, mac)) = uplink {
            super::garp::announce(ifindex, mac, new, rounds);
        }
    }

    fn sync_router_with(&self, world: &crate::cluster::World) {
        // Listeners first: the router's sync rewrites their lists with what it knows.
        let nodes = gateway::listen_nodes(world, &self.node);
        if let Err(e) = self
            .dataplane
            .lock()
            .expect("dataplane lock")
            .set_listen_nodes(nodes)
        {
            tracing::error!(error = %e, "cannot write the listener lists");
        }
        let (want, skipped) = gateway::desired(world);
        {
            let mut logged = self.router_skips.lock().expect("router skips lock");
            for line in skipped {
                if logged.insert(line.clone()) {
                    tracing::warn!(what = %line, "left out of the router");
                }
            }
        }
        let written = self
            .dataplane
            .lock()
            .expect("dataplane lock")
            .sync_router(&want);
        match written {
            Ok(done) if done.is_empty() => {}
            Ok(done) => tracing::info!(
                tables = done.tables,
                segments = done.segments,
                neighbours = done.neighbours,
                ports = done.ports,
                "router synced"
            ),
            Err(e) => tracing::error!(error = %e, "cannot write the router maps"),
        }
    }

    /// A Node is listed for a segment while any endpoint of the segment lives there.
    fn sync_remotes(
        &self,
        world: &crate::cluster::World,
    ) -> Result<usize, crate::cluster::ClusterError> {
        let vni_of = |l2: &str| {
            world
                .objects
                .l2network(l2)
                .and_then(|l| l.status.as_ref())
                .map(|s| s.vni)
                .unwrap_or(0)
        };
        let mut want: BTreeMap<u32, BTreeMap<u32, u32>> = BTreeMap::new();
        for e in world
            .endpoints
            .iter()
            .filter(|e| e.spec.node_name != self.node)
        {
            let Some(vni) = e.spec.l2_network.as_deref().map(vni_of) else {
                continue;
            };
            let Ok(ip) = e.spec.node_ip.parse::<Ipv4Addr>() else {
                continue;
            };
            if vni != 0 {
                *want
                    .entry(vni)
                    .or_default()
                    .entry(ip.to_bits())
                    .or_default() += 1;
            }
        }
        let written = self
            .dataplane
            .lock()
            .expect("dataplane lock")
            .set_remotes(&want);
        match written {
            Ok(n) => Ok(n),
            Err(e) => {
                tracing::error!(error = %e, "cannot write the remote lists");
                Ok(0)
            }
        }
    }

    /// After a start (a restart adopting a previous daemon's datapath, or a new layout
    /// version), makes the Node agree with the cluster: ports whose interface is gone
    /// are removed, Pod NICs the datapath does not serve are attached again, and this
    /// Node's NetworkEndpoints match its ports (Pods deleted while the daemon was down
    /// lose theirs). Returns what it changed, for the log.
    pub fn reconcile_ports(&self) -> Result<ReconcileReport, CniError> {
        let mut report = ReconcileReport {
            stale_ports: self.prune_stale_ports(),
            ..Default::default()
        };
        let links = port_links(&format!("{}:", veth::OWNER_ALIAS))?;
        let (world, _) = self.cluster.read().map_err(cluster_err)?;
        let mut dp = self.dataplane.lock().expect("dataplane lock");
        let served: BTreeSet<u32> = dp.ports().into_iter().collect();
        for (name, ifindex, alias) in &links {
            let Some(nic) = nic_of(&world, alias) else {
                continue;
            };
            let Some(spec) = nic::ready_port_spec(nic, &alias.container_id, *ifindex) else {
                tracing::warn!(nic = %alias.nic(), "not attached again: its NetworkInterface has no VNI or address yet");
                continue;
            };
            if served.contains(ifindex) {
                // A daemon killed between two writes of a port leaves it listed but
                // inactive, on another segment or not held to its address: write it
                // again.
                let whole = dp.port_attached(*ifindex)
                    && dp.port(*ifindex).is_ok_and(|p| spec.written_as(&p));
                if whole {
                    continue;
                }
                if let Err(e) = dp.remove_port(*ifindex) {
                    tracing::warn!(nic = %alias.nic(), error = %e, "cannot reset a half-written port");
                    continue;
                }
            }
            match dp.attach_port(name, spec) {
                Ok(_) => report.reattached += 1,
                Err(e) => tracing::warn!(nic = %alias.nic(), error = %e, "cannot attach again"),
            }
        }
        // What the datapath does not serve now runs no program of ours (a filter an
        // older daemon or layout left on a veth whose NIC is gone).
        let veths: Vec<(String, u32)> = links.iter().map(|(n, i, _)| (n.clone(), *i)).collect();
        report.stale_filters = dp.detach_unserved_filters(&veths);
        drop(dp);
        let mine: BTreeSet<(String, String)> = links
            .iter()
            .map(|(_, _, a)| (a.namespace.clone(), format!("{}.{}", a.pod, a.interface)))
            .collect();
        for ep in world
            .endpoints
            .iter()
            .filter(|e| e.spec.node_name == self.node)
        {
            let key = (
                ep.metadata.namespace.clone().unwrap_or_default(),
                ep.metadata.name.clone().unwrap_or_default(),
            );
            if !mine.contains(&key) {
                self.cluster
                    .delete_endpoint(&key.0, &key.1)
                    .map_err(cluster_err)?;
                report.stale_endpoints += 1;
            }
        }
        let have: BTreeSet<(String, String)> = world
            .endpoints
            .iter()
            .filter(|e| e.spec.node_name == self.node)
            .map(|e| {
                (
                    e.metadata.namespace.clone().unwrap_or_default(),
                    e.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect();
        for (_, _, alias) in &links {
            let key = (
                alias.namespace.clone(),
                format!("{}.{}", alias.pod, alias.interface),
            );
            if have.contains(&key) {
                continue;
            }
            let nic = nic_of(&world, alias);
            if let Some(nic) = nic {
                let ep = self.endpoint_for(&alias.namespace, &alias.pod, &alias.container_id, nic);
                self.cluster.put_endpoint(ep).map_err(cluster_err)?;
                report.restored_endpoints += 1;
            }
        }
        Ok(report)
    }
}

/// What [`Agent::reconcile_ports`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub stale_ports: usize,
    pub reattached: usize,
    pub stale_endpoints: usize,
    /// Port filters detached from veths this datapath does not serve.
    pub stale_filters: usize,
    pub restored_endpoints: usize,
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
