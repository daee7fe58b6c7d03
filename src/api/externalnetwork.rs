//! ExternalNetwork (seed 003): the outside network ElasticIPs come from, and the
//! segment their direct NICs live in (`status.networkID`, a VNI of the pool Subnets and
//! L2Networks share: the datapath's tables are keyed by VNI alone).
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

/// How the addresses of an ExternalNetwork reach the outside.
pub const TYPE_ARP: &str = "arp";
pub const TYPE_BGP: &str = "bgp";

/// Whether the Nodes run a BGP speaker (issue 27): until they do, admission refuses
/// BGPPeers and BGPAdvertisements and a bgp network reports `Announced` False, since
/// nothing would peer or announce.
pub const BGP_SPEAKER_ON_NODES: bool = true;

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "ExternalNetwork",
    shortname = "extnet",
    status = "ExternalNetworkStatus",
    printcolumn(name = "TYPE", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "NETWORKID", type_ = "integer", json_path = ".status.networkID"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExternalNetworkSpec {
    /// `arp` (the Nodes answer ARP on their own L2) or `bgp`; immutable.
    #[serde(rename = "type")]
    pub type_: String,
    /// AddressPools of the same `advertiseMode`, in the order addresses are taken.
    pub address_pools: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalNetworkStatus {
    /// The VNI of the direct NICs' segment: 0 until chosen, then never changed.
    #[serde(default, rename = "networkID")]
    pub network_id: u32,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
