//! What a component reads through the [`super::Cluster`] interface: every object, the
//! Pods and the NetworkEndpoints, as one value. It lives beside the interface, not in a
//! backend, so that the controller and the node read it without depending on a store.
use serde::{Deserialize, Serialize};

use super::Snapshot;
use crate::api::{EndpointSliceRecord, NetworkEndpoint, NodeRecord, PodRecord, ServiceRecord};

/// Everything the cluster holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct World {
    pub objects: Snapshot,
    pub endpoints: Vec<NetworkEndpoint>,
    pub pods: Vec<PodRecord>,
    /// The cluster's Services and EndpointSlices (Kubernetes' own kinds, read as
    /// records: `api::service`).
    #[serde(default)]
    pub services: Vec<ServiceRecord>,
    #[serde(default)]
    pub endpoint_slices: Vec<EndpointSliceRecord>,
    /// The cluster's Nodes (Kubernetes' own; in standalone mode the topology's, put
    /// by the run as a kubelet registers its Node).
    #[serde(default)]
    pub nodes: Vec<NodeRecord>,
    /// Pods admitted so far: the embedded store's creation order (EIP-20's oldest).
    #[serde(default)]
    pub pods_admitted: u64,
}

/// The Nodes' names and InternalIPs (those that have one), as the rules read them
/// (`Snapshot::node_addresses`).
pub fn node_addresses(nodes: &[NodeRecord]) -> Vec<(String, std::net::Ipv4Addr)> {
    nodes
        .iter()
        .filter_map(|n| Some((n.name.clone(), n.internal_ip.parse().ok()?)))
        .collect()
}
