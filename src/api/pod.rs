//! A Pod as Juneau sees it: what admission, the controller and the CNI need of it.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A Pod: its identity, Node and annotations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub annotations: BTreeMap<String, String>,
    /// Set by the mutating side of admission (L2-27).
    pub dns_policy: String,
    /// Being deleted (`metadata.deletionTimestamp`): its NICs still exist, but an
    /// ElasticIP it named may be handed over (EIP-20).
    #[serde(default)]
    pub terminating: bool,
    /// When the Pod was created (RFC 3339), for the oldest-first holder choice.
    #[serde(default)]
    pub created: String,
}
