//! Direct ElasticIPs on this Node: every holder of the cluster (`jn_eip_direct`) and
//! the addresses this Node answers ARP for on its uplink (`jn_ext_arp`), desired by
//! `node::elasticip` (pure), with gratuitous ARP for the ones it starts answering for
//! (★ EIP-11).
use std::{
    collections::BTreeSet,
    net::Ipv4Addr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
};

use crate::node::feature::{FeatureError, NodeFeature, NodeView};
use crate::{
    cluster::World,
    features::elasticip::{garp, node as elasticip},
    node::dataplane::ElasticIpWriter,
};

pub struct ElasticIps {
    /// The ElasticIP maps (their own lock).
    writer: Mutex<ElasticIpWriter>,
    /// Rounds of gratuitous ARP for a new answer (0: none).
    rounds: Arc<AtomicU32>,
    /// The addresses this Node answers for now.
    answering: Mutex<BTreeSet<Ipv4Addr>>,
}

impl ElasticIps {
    pub fn new(rounds: Arc<AtomicU32>, writer: ElasticIpWriter) -> Self {
        Self {
            writer: Mutex::new(writer),
            rounds,
            answering: Mutex::new(BTreeSet::new()),
        }
    }
}

impl NodeFeature for ElasticIps {
    fn name(&self) -> &'static str {
        "elastic-ips"
    }

    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        let holders = elasticip::holders(world);
        let mut eips = self.writer.lock().expect("ElasticIP lock");
        // What the port owner knows, read in one short hold of its lock, and the
        // ElasticIPs attached to its Subnet NICs given to their ports.
        let (local, uplink_ifindex, public) = {
            let mut dp = node.dataplane.lock().expect("dataplane lock");
            let public = dp.set_public_addresses(elasticip::public_addresses(&holders));
            (dp.held_ports(), dp.uplink_ifindex(), public)
        };
        let ports = public.map_err(FeatureError::write("the ports' attached ElasticIPs"))?;
        if ports > 0 {
            tracing::info!(ports, "attached ElasticIPs given to their ports");
        }
        // A failed write of the holders does not stop the answers (each is its own
        // map); it is returned once the answers are written.
        let (held, holders_failed) = match eips.set_elastic_ips(&holders, &local) {
            Ok(n) => (n, None),
            Err(e) => (0, Some(FeatureError::write("the ElasticIP holders")(e))),
        };
        if held > 0 {
            tracing::info!(
                changed = held,
                held = holders.len(),
                "ElasticIP holders synced"
            );
        }
        // Unreadable, the answers written stay: better than none until the MAC reads.
        let uplink =
            uplink_ifindex
                .and_then(|i| eips.uplink(i))
                .map_err(|e| FeatureError::Read {
                    what: "the uplink's MAC",
                    kept: "the ElasticIP ARP answers are left as they are",
                    source: Box::new(e),
                })?;
        let answers = uplink
            .map(|(_, mac)| elasticip::arp_answers(world, node.name, mac))
            .unwrap_or_default();
        let answered = eips
            .set_arp_answers(&answers)
            .map_err(FeatureError::write("the ElasticIP ARP answers"))?;
        drop(eips);
        if answered > 0 {
            tracing::info!(
                changed = answered,
                answered = answers.len(),
                "ElasticIP ARP answers synced"
            );
        }
        // What this Node answers for from now on is announced (★ EIP-11).
        let now: BTreeSet<Ipv4Addr> = answers.keys().copied().collect();
        let new: Vec<Ipv4Addr> = {
            let mut before = self.answering.lock().expect("answering lock");
            let new = now.difference(&before).copied().collect();
            *before = now;
            new
        };
        if let Some((ifindex, mac)) = uplink {
            garp::announce(ifindex, mac, new, self.rounds.load(Ordering::Relaxed));
        }
        match holders_failed {
            Some(e) => Err(e),
            None => Ok(held + answered),
        }
    }
}
