//! BGPAdvertisement (BGP-02): which bgp AddressPools the Nodes announce, by all Nodes
//! or by the one `nodeName` names, whole or one `prefix` inside them. Users write
//! them; the controller writes `ena-<attachment>` ones for the NATGateways' per-Node
//! addresses (NAT-02), labelled as its own.
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "BGPAdvertisement",
    printcolumn(name = "POOLS", type_ = "string", json_path = ".spec.addressPools"),
    printcolumn(name = "PREFIX", type_ = "string", json_path = ".spec.prefix"),
    printcolumn(name = "NODE", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BGPAdvertisementSpec {
    /// bgp AddressPools, at least one; freely editable.
    pub address_pools: Vec<String>,
    /// Only this Node announces (EIP-14: the others then deliver the range
    /// elsewhere); every Node when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// One CIDR inside a listed pool's CIDR; the pools' CIDRs whole when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// The label on the BGPAdvertisements the controller writes (NAT-02's `ena-`): the
/// only ones it ever deletes.
pub const MANAGED_BY: (&str, &str) = ("juneau.loutres.me/managed-by", "juneau");

impl BGPAdvertisementSpec {
    /// Whether `node` announces this advertisement.
    pub fn announced_by(&self, node: &str) -> bool {
        self.node_name
            .as_deref()
            .is_none_or(|n| n.is_empty() || n == node)
    }
}
