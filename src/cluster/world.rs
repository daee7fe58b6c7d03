//! What a component reads through the [`super::Cluster`] interface: every object, the
//! Pods and the NetworkEndpoints, as one value. It lives beside the interface, not in a
//! backend, so that the controller and the node read it without depending on a store.
use serde::{Deserialize, Serialize};

use super::Snapshot;
use crate::api::{NetworkEndpoint, PodRecord};

/// Everything the cluster holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct World {
    pub objects: Snapshot,
    pub endpoints: Vec<NetworkEndpoint>,
    pub pods: Vec<PodRecord>,
    /// Pods admitted so far: the embedded store's creation order (EIP-20's oldest).
    #[serde(default)]
    pub pods_admitted: u64,
}
