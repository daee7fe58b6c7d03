//! NATGateways (NAT-01) and the Nodes' addresses on their ExternalNetworks (NAT-02),
//! pure: one ExternalNetworkAttachment `<externalNetwork>--<node>` per (ExternalNetwork
//! a NATGateway uses, Node), its address first fit from the network's pools out of
//! every address an ElasticIP holds or asks for (one allocator: neither takes the
//! other's), kept once given while the Node is there; an ARPAdvertisement `ena-<name>`
//! that the attachment's Node answers; and each NATGateway's status. A Node that leaves
//! loses its attachment, and the address is free for the next one.
//!
//! A pool too small for the Nodes leaves the Nodes beyond it (by name) with an
//! attachment that is not Ready and says which pools to grow; the others keep theirs.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use crate::controller::externalnetwork::{Unallocated, pools_problem};
use crate::{
    admission::validate::Snapshot,
    alloc::Pool,
    api::{
        ARPAdvertisement, BGPAdvertisement, ExternalNetworkAttachment, NodeRecord,
        arpadvertisement::ARPAdvertisementSpec,
        bgpadvertisement::{BGPAdvertisementSpec, MANAGED_BY},
        condition::Condition,
        externalnetwork::{BGP_SPEAKER_ON_NODES, TYPE_ARP, TYPE_BGP},
        externalnetworkattachment::{
            ExternalNetworkAttachmentSpec, ExternalNetworkAttachmentStatus, PORTS_EXHAUSTED,
            advertisement_name, name_for,
        },
        natgateway::NATGatewayStatus,
    },
};

/// What this reconciler wants written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Every attachment, with its status; any other is deleted.
    pub attachments: Vec<ExternalNetworkAttachment>,
    /// The `ena-<attachment>` advertisements of `arp` networks.
    pub arp_advertisements: Vec<ARPAdvertisement>,
    /// The `ena-<attachment>` advertisements of `bgp` networks: the address as a /32
    /// announced by its Node alone (NAT-02).
    pub bgp_advertisements: Vec<BGPAdvertisement>,
    /// By NATGateway name.
    pub nat_gateway_status: BTreeMap<String, NATGatewayStatus>,
}

/// The ExternalNetworks whose pools give the Nodes an address: those a NATGateway not
/// being deleted names, that exist, whose pools hand out addresses, and that the
/// datapath announces (`arp`, or `bgp` once the Nodes run a speaker).
fn networks_in_use(snap: &Snapshot) -> BTreeSet<String> {
    snap.nat_gateways
        .iter()
        .filter(|g| g.metadata.deletion_timestamp.is_none())
        .filter_map(|g| snap.external_network(&g.spec.external_network))
        .filter(|n| n.spec.type_ == TYPE_ARP || (n.spec.type_ == TYPE_BGP && BGP_SPEAKER_ON_NODES))
        .filter(|n| pools_problem(snap, &n.spec.type_, &n.spec.address_pools).is_none())
        .filter_map(|n| n.metadata.name.clone())
        .collect()
}

fn is_bgp(snap: &Snapshot, net: &str) -> bool {
    snap.external_network(net)
        .is_some_and(|n| n.spec.type_ == TYPE_BGP)
}

/// NAT-02 on a bgp network: `ena-<attachment>`, the address as a /32 of the pool that
/// holds it, announced by the attachment's Node alone (the others deliver it there,
/// EIP-14), labelled as the controller's.
fn bgp_advertisement(
    snap: &Snapshot,
    net: &str,
    attachment: &str,
    address: Ipv4Addr,
    node: &str,
) -> BGPAdvertisement {
    let pool = snap
        .external_network(net)
        .into_iter()
        .flat_map(|n| n.spec.address_pools.iter())
        .find(|p| {
            snap.address_pool(p).is_some_and(|p| {
                p.spec
                    .addresses
                    .iter()
                    .filter_map(|c| c.parse::<ipnet::Ipv4Net>().ok())
                    .any(|c| c.contains(&address))
            })
        })
        .cloned()
        .unwrap_or_default();
    let mut adv = BGPAdvertisement::new(
        &advertisement_name(attachment),
        BGPAdvertisementSpec {
            address_pools: vec![pool],
            node_name: Some(node.to_owned()),
            prefix: Some(format!("{address}/32")),
        },
    );
    adv.metadata.labels = Some(
        [(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())]
            .into_iter()
            .collect(),
    );
    adv
}

/// `eips`: this pass's ElasticIP addresses (`elasticip::allocate`), held out of the
/// attachments' first fit; `snap.external_network_attachments` holds the attachments
/// as written before (their addresses kept).
pub fn reconcile(
    snap: &Snapshot,
    nodes: &[NodeRecord],
    eips: &BTreeMap<String, Result<Ipv4Addr, Unallocated>>,
) -> Outcome {
    let mut held: BTreeSet<Ipv4Addr> = eips
        .values()
        .filter_map(|a| a.as_ref().ok().copied())
        .collect();

    let mut nodes: Vec<&NodeRecord> = nodes
        .iter()
        .filter(|n| !n.terminating && !n.name.is_empty())
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes.dedup_by(|a, b| a.name == b.name);
    let wanted: Vec<(String, &NodeRecord)> = networks_in_use(snap)
        .into_iter()
        .flat_map(|net| nodes.iter().map(move |n| (net.clone(), *n)))
        .collect();
    // Addresses kept first: an attachment that is still wanted keeps its address when
    // it is still in its network's pools.
    let mut kept: BTreeMap<String, Ipv4Addr> = BTreeMap::new();
    for (net, node) in &wanted {
        let name = name_for(net, &node.name);
        let Some(old) = snap.external_network_attachment(&name) else {
            continue;
        };
        let Some(en) = snap.external_network(net) else {
            continue;
        };
        let Some(a) = old.status.as_ref().and_then(|s| s.assigned_ip) else {
            continue;
        };
        let in_pools = Pool::new(snap.pool_ranges(en)).contains(a);
        // Two attachments never share one (an ElasticIP asked for it first: the older
        // claim, the ElasticIP's, has it already out of `held`).
        if in_pools && !held.contains(&a) && kept.values().all(|k| *k != a) {
            kept.insert(name, a);
        }
    }
    held.extend(kept.values().copied());
    // Asked for by an ElasticIP: no attachment's first fit, as for the ElasticIPs
    // themselves (a kept attachment keeps its address: the ElasticIP is told it is in
    // use, `RequestedIPInUse`).
    held.extend(
        snap.elastic_ips
            .iter()
            .filter_map(|e| e.spec.requested_ip.as_deref()?.parse::<Ipv4Addr>().ok()),
    );
    let mut out = Outcome::default();
    for (net, node) in &wanted {
        let name = name_for(net, &node.name);
        let address = kept.get(&name).copied().or_else(|| {
            let en = snap.external_network(net)?;
            let mut pool = Pool::new(snap.pool_ranges(en));
            for h in &held {
                pool.hold(*h);
            }
            let free = pool.first_free()?;
            held.insert(free);
            Some(free)
        });
        let (assigned_ip, ready) = match address {
            Some(a) if is_bgp(snap, net) => {
                out.bgp_advertisements
                    .push(bgp_advertisement(snap, net, &name, a, &node.name));
                (
                    Some(a),
                    Condition::new(
                        "Ready",
                        true,
                        "Assigned",
                        format!("Node {} announces {a}/32 by BGP", node.name),
                    ),
                )
            }
            Some(a) => {
                out.arp_advertisements.push(ARPAdvertisement::new(
                    &advertisement_name(&name),
                    ARPAdvertisementSpec {
                        external_network: net.clone(),
                        address: Some(a),
                        node_name: node.name.clone(),
                    },
                ));
                (
                    Some(a),
                    Condition::new(
                        "Ready",
                        true,
                        "Assigned",
                        format!("Node {} answers ARP for {a}", node.name),
                    ),
                )
            }
            None => (
                None,
                Condition::new(
                    "Ready",
                    false,
                    "NoAddressAvailable",
                    format!(
                        "the AddressPools of ExternalNetwork {net:?} ({}) have no free address for Node {}: add addresses to one of them; the Nodes that have one keep working",
                        snap.external_network(net)
                            .map(|n| n.spec.address_pools.join(", "))
                            .unwrap_or_default(),
                        node.name
                    ),
                ),
            ),
        };
        let mut a = ExternalNetworkAttachment::new(
            &name,
            ExternalNetworkAttachmentSpec {
                external_network: net.clone(),
                node_name: node.name.clone(),
            },
        );
        // The Node's own condition (`node::nat_ports`) is carried over.
        let mut conditions = vec![ready];
        if let Some(old) = snap
            .external_network_attachment(&name)
            .and_then(|o| o.status.as_ref())
        {
            conditions.extend(
                old.conditions
                    .iter()
                    .filter(|c| c.type_ == PORTS_EXHAUSTED)
                    .cloned(),
            );
        }
        a.status = Some(ExternalNetworkAttachmentStatus {
            assigned_ip,
            conditions,
        });
        out.attachments.push(a);
    }
    for g in &snap.nat_gateways {
        let name = g.metadata.name.clone().unwrap_or_default();
        out.nat_gateway_status
            .insert(name, gateway_status(snap, g, &out.attachments, nodes.len()));
    }
    out
}

fn gateway_status(
    snap: &Snapshot,
    g: &crate::api::NATGateway,
    attachments: &[ExternalNetworkAttachment],
    node_count: usize,
) -> NATGatewayStatus {
    let not_ready = |reason: &str, message: String| NATGatewayStatus {
        ready_nodes: 0,
        nodes: node_count as u32,
        conditions: vec![Condition::new("Ready", false, reason, message)],
    };
    let (vpc, en) = (&g.spec.vpc, &g.spec.external_network);
    if snap.vpc(vpc).is_none() {
        return not_ready(
            "MissingDependency",
            format!("Vpc {vpc:?} not found: create it, or delete this NATGateway"),
        );
    }
    let Some(net) = snap.external_network(en) else {
        return not_ready(
            "MissingDependency",
            format!("ExternalNetwork {en:?} not found: create it (type arp, with AddressPools)"),
        );
    };
    if net.spec.type_ != TYPE_ARP && !(net.spec.type_ == TYPE_BGP && BGP_SPEAKER_ON_NODES) {
        return not_ready(
            "NotSupported",
            format!(
                "ExternalNetwork {en:?} is of type {:?}: a NATGateway's per-Node addresses are announced by ARP only until BGP is built; use an arp ExternalNetwork",
                net.spec.type_
            ),
        );
    }
    if let Some((reason, message)) = pools_problem(snap, &net.spec.type_, &net.spec.address_pools) {
        return not_ready(reason, format!("ExternalNetwork {en:?}: {message}"));
    }
    let mine: Vec<&ExternalNetworkAttachment> = attachments
        .iter()
        .filter(|a| &a.spec.external_network == en)
        .collect();
    let ready: Vec<&str> = mine
        .iter()
        .filter(|a| a.status.as_ref().is_some_and(|s| s.assigned_ip.is_some()))
        .map(|a| a.spec.node_name.as_str())
        .collect();
    let waiting: Vec<&str> = mine
        .iter()
        .filter(|a| a.status.as_ref().is_none_or(|s| s.assigned_ip.is_none()))
        .map(|a| a.spec.node_name.as_str())
        .collect();
    let mut status = NATGatewayStatus {
        ready_nodes: ready.len() as u32,
        nodes: node_count as u32,
        conditions: vec![],
    };
    let condition = if ready.is_empty() {
        Condition::new(
            "Ready",
            false,
            "NoNodeAddress",
            if node_count == 0 {
                "no Node is registered yet".to_owned()
            } else {
                format!(
                    "no Node has an address on ExternalNetwork {en:?}: its pools are full; add addresses"
                )
            },
        )
    } else if waiting.is_empty() {
        Condition::new(
            "Ready",
            true,
            "Reconciled",
            format!("{} of {node_count} Nodes translate through it", ready.len()),
        )
    } else {
        Condition::new(
            "Ready",
            true,
            "PartiallyAssigned",
            format!(
                "{} of {node_count} Nodes translate through it; Nodes {} have no address (pools of {en:?} too small): their Pods' connections through it are dropped (NAT_NO_ADDRESS)",
                ready.len(),
                waiting.join(", ")
            ),
        )
    };
    status.conditions.push(condition);
    status
}

/// Whether the NATGateway `default` of the default Vpc is Ready in this pass (one of
/// that name in another Vpc gives the default Vpc nothing).
pub fn is_default_ready(snap: &Snapshot, out: &Outcome) -> bool {
    use crate::api::{DEFAULT_VPC, natgateway::DEFAULT_NAT_GATEWAY};
    snap.nat_gateway(DEFAULT_NAT_GATEWAY)
        .is_some_and(|g| g.spec.vpc == DEFAULT_VPC)
        && is_ready(out, DEFAULT_NAT_GATEWAY)
}

/// Whether the NATGateway `name` is Ready in this pass's statuses.
pub fn is_ready(out: &Outcome, name: &str) -> bool {
    out.nat_gateway_status.get(name).is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
