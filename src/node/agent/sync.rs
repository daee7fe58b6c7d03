//! The rest of the cluster in the datapath: the router's maps, the ElasticIP holders
//! and answers (with gratuitous ARP for new ones), the remote VTEP lists.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use super::Agent;
use crate::{
    cluster::{ClusterError, World},
    node::{elasticip, garp, gateway},
};

impl Agent {
    /// Brings the datapath's view of the rest of the cluster in line with it: the
    /// remote VTEP lists and the router (gateway segments, RouteTables, neighbours).
    /// Returns once a sync that read the cluster after this call has been written
    /// (before a CNI ADD configures ports, so that a port of a gateway segment enters
    /// the router from its first frame; after every request; on every change). Callers
    /// meanwhile share one sync (`node::coalesce`).
    pub fn sync_from_cluster(&self) -> Result<(), ClusterError> {
        self.syncs.run(|| {
            let (world, _) = self.cluster.read()?;
            self.sync_router_with(&world);
            self.sync_elastic_ips(&world);
            self.sync_remotes(&world).map(drop)
        })
    }

    /// Every direct ElasticIP's holder, and the addresses this Node advertises.
    fn sync_elastic_ips(&self, world: &World) {
        let holders = elasticip::holders(world);
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
            .map(|(_, mac)| elasticip::arp_answers(world, &self.node, mac))
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
            garp::announce(ifindex, mac, new, rounds);
        }
    }

    fn sync_router_with(&self, world: &World) {
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
    fn sync_remotes(&self, world: &World) -> Result<usize, ClusterError> {
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
                let line = format!(
                    "NetworkEndpoint {}/{}: spec.nodeIP {:?} is not an IPv4 address; its Node is left out of the remote lists",
                    e.metadata.namespace.as_deref().unwrap_or(""),
                    e.metadata.name.as_deref().unwrap_or(""),
                    e.spec.node_ip
                );
                if self
                    .router_skips
                    .lock()
                    .expect("router skips lock")
                    .insert(line.clone())
                {
                    tracing::warn!(what = %line, "left out of the remote lists");
                }
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
}
