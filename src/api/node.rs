//! A Node as Juneau sees it: the Nodes the cluster has, which the controller gives
//! per-Node things (a NATGateway's ExternalNetworkAttachments). Kubernetes' own Node
//! objects, read as records (the kubelet registers them); in standalone mode the run
//! registers each Node of its topology as a kubelet would.
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub name: String,
    /// Its InternalIP (the first), empty when it has none yet.
    #[serde(default)]
    pub internal_ip: String,
    /// Being deleted (`metadata.deletionTimestamp`): it gets nothing new.
    #[serde(default)]
    pub terminating: bool,
}

impl NodeRecord {
    /// What the components need of a Kubernetes Node.
    pub fn from_k8s(n: &k8s_openapi::api::core::v1::Node) -> Self {
        let internal_ip = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone())
            .unwrap_or_default();
        Self {
            name: n.metadata.name.clone().unwrap_or_default(),
            internal_ip,
            terminating: n.metadata.deletion_timestamp.is_some(),
        }
    }
}
