//! The CNI commands: ADD (all or nothing, undone in reverse on a failed step), DEL and
//! GC (idempotent, found by the host veths' aliases), CHECK.
use std::{
    collections::BTreeSet,
    path::Path,
    time::{Duration, Instant},
};

use super::{Agent, NIC_WAIT, PortLink, cluster_err, delegate, port_links};
use crate::{
    api::{NetworkEndpoint, NetworkInterface, net::Mac, networkendpoint::NetworkEndpointSpec},
    cni::{CniError, CniResult, Request, code},
    node::{
        netlink,
        nic::{self, AddTimes, Made, NicContext, Part, Step},
        veth::{self, PortAlias},
    },
};

/// What an endpoint writer answers: the write's outcome and how long it took.
type EndpointAnswer = std::sync::mpsc::Receiver<(Result<(), CniError>, Duration)>;

/// Whether `nic`'s NetworkEndpoint is written while its veth is plumbed rather than
/// after, by one of the agent's kept endpoint writers: the API server's round trip (a
/// few hundred ms at the tail of a burst of Pod starts) then overlaps the netlink work
/// instead of adding to it, and the ADD still answers only once both are done (a
/// failed one undoes the other). Not for a direct
/// ElasticIP NIC: its endpoint moves the address (every Node sends its traffic to the
/// holder the endpoints name, EIP-23), which must wait until the new port can take it.
fn overlaps_endpoint(nic: &NetworkInterface) -> bool {
    nic.spec.elastic_ip.is_none()
}

impl Agent {
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
                        "the NICs of Pod {ns}/{pod} are not allocated yet ({}); the kubelet will retry",
                        waiting_for(ns, &nics)
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
            times: AddTimes::default(),
        }
    }

    /// The ADD, how long of it went to waiting for the controller's allocation and
    /// where the rest went (logged with the request: a burst of Pods waits on the
    /// controller first).
    pub(super) fn add(&self, req: &Request) -> Result<(CniResult, Duration, AddTimes), CniError> {
        let (ns, pod) = Self::pod_of(req)?;
        let start = Instant::now();
        let nics = self.wait_for_nics(&ns, &pod)?;
        let waited = start.elapsed();
        let nics = delegate::nics_of_call(req, &format!("{ns}/{pod}"), nics, || {
            self.multus_interfaces(&ns, &pod)
        })?;
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
        let opened = Step::now();
        let nl = netlink::Session::open(Some(Path::new(&req.netns)))
            .map_err(|e| nic::io("cannot open netlink to the Node and the Pod")(e.to_string()))?;
        ctx.times.add(Part::Session, opened);
        let mut made = Made::default();
        let mut endpoints = Vec::new();
        let mut result = CniResult {
            cni_version: crate::cni::VERSION.into(),
            dns: serde_json::json!({}),
            ..Default::default()
        };
        for (nic, driver) in nics.iter().zip(drivers) {
            let ep = self.endpoint_for(&ns, &pod, &req.container_id, nic);
            let name = ep.metadata.name.clone().unwrap_or_default();
            let beside = if overlaps_endpoint(nic) {
                self.write_endpoint_beside(ep.clone())
            } else {
                None
            };
            let set_up = driver.setup(&ctx, &nl, nic, &mut made, &mut result);
            // `None`: not written (the NIC's setup failed first).
            let written = match beside {
                Some(answer) => Some(match answer.recv() {
                    Ok((written, took)) => {
                        ctx.times.add_elapsed(Part::Endpoint, took);
                        written
                    }
                    Err(_) => Err(nic::io("cannot write the NetworkEndpoint")(
                        "its writer thread is gone".into(),
                    )),
                }),
                None => set_up.is_ok().then(|| {
                    let put = Step::now();
                    let written = self.cluster.put_endpoint(ep).map_err(cluster_err);
                    ctx.times.add(Part::Endpoint, put);
                    written
                }),
            };
            if matches!(written, Some(Ok(()))) {
                endpoints.push(name);
            }
            if let Err(e) = set_up.and(written.unwrap_or(Ok(()))) {
                self.undo(made, &ns, endpoints);
                return Err(e);
            }
        }
        if let Some(records) = &self.netns_records
            && let Err(e) = crate::node::probe::record_netns(records, &req.container_id, ctx.netns)
        {
            // Only the rewritten probes need it: they answer 503 for this Pod.
            tracing::warn!(error = %e, container = %req.container_id, "cannot record the Pod's namespace for its probes");
        }
        Ok((result, waited, ctx.times))
    }

    /// Hands `ep` to an endpoint writer; its answer (the write's outcome and time)
    /// comes on the receiver. `None` when no writer can be had: the caller writes its
    /// own copy after the NIC.
    fn write_endpoint_beside(&self, ep: NetworkEndpoint) -> Option<EndpointAnswer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let cluster = self.cluster.clone();
        let job = move || {
            let put = Instant::now();
            let written = cluster.put_endpoint(ep).map_err(cluster_err);
            let _ = tx.send((written, put.elapsed()));
        };
        match self.endpoint_writers.run(job) {
            Ok(()) => Some(rx),
            Err(e) => {
                tracing::warn!(error = %e, "no endpoint writer; writing after the NIC instead");
                None
            }
        }
    }

    /// True unless the router serves the segment of every NIC (a direct ElasticIP
    /// NIC needs none): a port of a gateway segment must get the gateway bit from its
    /// first frame, and whether a segment the router does not serve has a gateway is
    /// the cluster's to say, so such an ADD syncs first. ADDs on served segments skip
    /// that sync (a hundred at once each waited for one); the sync after the answer
    /// still seeds the new NIC's neighbour entry.
    fn router_lacks_a_segment_of(&self, nics: &[NetworkInterface]) -> bool {
        let served = self.served.read().expect("served segments lock");
        nics.iter().any(|n| {
            let vni = n.status.as_ref().map_or(0, |s| s.vni);
            n.spec.elastic_ip.is_none() && !served.contains(&vni)
        })
    }

    /// The NetworkEndpoint `<pod>.<iface>` that tells other Nodes where a NIC lives.
    pub(super) fn endpoint_for(
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
                mac_address: Some(Mac(nic::nic_mac(container_id, iface))),
                node_name: self.node.clone(),
                node_ip: Some(self.node_ip),
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

    /// The interfaces Multus calls a delegate for, from the Pod's annotation (none
    /// when the Pod cannot be read: the call then handles every NIC, as without Multus).
    fn multus_interfaces(&self, ns: &str, pod: &str) -> BTreeSet<String> {
        match self.cluster.read() {
            Ok((world, _)) => world
                .pods
                .iter()
                .find(|p| p.namespace == ns && p.name == pod)
                .map(|p| crate::api::multus::delegated_interfaces(&p.annotations))
                .unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the Pod's Multus networks");
                BTreeSet::new()
            }
        }
    }

    /// Removes every NIC of the container (a delegate's call: its one interface);
    /// succeeds when there is nothing left to do.
    pub(super) fn del(&self, req: &Request) -> Result<(), CniError> {
        if delegate::delegated(req) {
            let links: Vec<PortLink> = port_links(&PortAlias::container_prefix(&req.container_id))?
                .into_iter()
                .filter(|(_, _, a)| a.interface == req.ifname)
                .collect();
            let mut result = self.remove_nics(links, "DEL");
            if let Ok((ns, pod)) = Self::pod_of(req)
                && let Err(e) =
                    self.delete_endpoints_of(&ns, &pod, &req.container_id, Some(&req.ifname))
            {
                result = Err(e);
            }
            return result;
        }
        let links = port_links(&PortAlias::container_prefix(&req.container_id))?;
        let mut result = self.remove_nics(links, "DEL");
        if let Some(records) = &self.netns_records {
            crate::node::probe::forget_netns(records, &req.container_id);
        }
        // A sandbox deleted before DEL took the veths with it: what the datapath and the
        // cluster still hold of them goes now.
        self.prune_stale_ports();
        if let Ok((ns, pod)) = Self::pod_of(req)
            && let Err(e) = self.delete_endpoints_of(&ns, &pod, &req.container_id, None)
        {
            result = Err(e);
        }
        result
    }

    /// Every NIC of the call (`delegate`) exists, is attached, and has its address.
    pub(super) fn check(&self, req: &Request) -> Result<(), CniError> {
        let (ns, pod) = Self::pod_of(req)?;
        let links = port_links(&PortAlias::container_prefix(&req.container_id))?;
        let ctx = self.context(req, &ns, &pod);
        let nics = delegate::nics_of_call(
            req,
            &format!("{ns}/{pod}"),
            self.cluster.interfaces_of(&ns, &pod).map_err(cluster_err)?,
            || self.multus_interfaces(&ns, &pod),
        )?;
        for nic in nics {
            let host = links
                .iter()
                .find(|(_, _, a)| a.interface == nic.spec.interface)
                .map(|(n, i, _)| (n.as_str(), *i));
            nic::driver_for(&nic)?.check(&ctx, &nic, host)?;
        }
        Ok(())
    }

    /// Removes the attachments of containers that are not in the valid list.
    pub(super) fn gc(&self, req: &Request) -> Result<(), CniError> {
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
        if let Some(records) = &self.netns_records {
            for (_, _, alias) in &stale {
                crate::node::probe::forget_netns(records, &alias.container_id);
            }
        }
        self.remove_nics(stale, "GC")
    }

    /// Removes the ports whose interface is gone; returns how many.
    pub(super) fn prune_stale_ports(&self) -> usize {
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
    /// (their MAC is derived from it, so a newer sandbox's endpoints stay); with
    /// `only`, that interface's alone.
    fn delete_endpoints_of(
        &self,
        ns: &str,
        pod: &str,
        container_id: &str,
        only: Option<&str>,
    ) -> Result<(), CniError> {
        let (world, _) = self.cluster.read().map_err(cluster_err)?;
        let prefix = format!("{pod}.");
        for ep in world.endpoints.iter().filter(|e| {
            e.spec.node_name == self.node && e.metadata.namespace.as_deref() == Some(ns)
        }) {
            let name = ep.metadata.name.as_deref().unwrap_or("");
            let Some(iface) = name.strip_prefix(&prefix) else {
                continue;
            };
            if only.is_some_and(|o| o != iface) {
                continue;
            }
            if ep.spec.mac_address == Some(Mac(nic::nic_mac(container_id, iface))) {
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
            errors.extend(nic::teardown_port(&self.dataplane, &name, ifindex, &alias));
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
}

/// What the first NIC that is not allocated waits for, as its condition says (or that
/// the Pod has no NIC at all: its annotations were not read by the controller).
fn waiting_for(ns: &str, nics: &[NetworkInterface]) -> String {
    let Some(nic) = nics
        .iter()
        .find(|n| n.status.as_ref().is_none_or(|s| s.phase != "Allocated"))
    else {
        return "the controller has made no NetworkInterface for it: check its juneau.loutres.me annotations and the controller's log".into();
    };
    let name = nic.metadata.name.as_deref().unwrap_or("");
    match nic
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.status != "True"))
    {
        Some(c) => format!("NetworkInterface {ns}/{name}: {}: {}", c.reason, c.message),
        None => format!("NetworkInterface {ns}/{name} has no status yet"),
    }
}
