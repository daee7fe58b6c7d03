//! Subnet: a routed segment of a Vpc. Its NICs get addresses from its `cidr` and a
//! default route via its gateway (the CIDR's first address, answered by the router on
//! every Node); they reach each other and every other segment of the Vpc by IPv4 only.
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use std::net::Ipv4Addr;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{condition::Condition, l2network::AclRef, net::Mac};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "Subnet",
    status = "SubnetStatus",
    printcolumn(name = "VPC", type_ = "string", json_path = ".spec.vpc"),
    printcolumn(name = "CIDR", type_ = "string", json_path = ".spec.cidr"),
    printcolumn(name = "GATEWAY", type_ = "string", json_path = ".status.gateway"),
    printcolumn(name = "VNI", type_ = "integer", json_path = ".status.vni")
)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSpec {
    pub vpc: String,
    pub cidr: String,
    /// A NetworkACL of the same Vpc, acting at the gateway (POL-01).
    #[serde(
        default,
        rename = "networkACL",
        skip_serializing_if = "Option::is_none"
    )]
    pub network_acl: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    /// From the `subnet-vni` AllocationPool, shared with L2Networks (L2-22).
    #[serde(default)]
    pub vni: u32,
    /// The CIDR's first address.
    #[serde(default, with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub gateway: Option<Ipv4Addr>,
    /// Chosen once, stable while the Subnet exists.
    #[serde(default, rename = "gatewayMAC", with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub gateway_mac: Option<Mac>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The NetworkACL's id in the datapath and the version of its rules (empty while
    /// they are invalid); absent without a NetworkACL.
    #[serde(
        default,
        rename = "networkACL",
        skip_serializing_if = "Option::is_none"
    )]
    pub network_acl: Option<AclRef>,
    /// A Vpc's `natSourceSubnet`: each Node's Service source address (SVC-02), held
    /// out of the Pods' addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_addresses: Vec<NodeAddress>,
}

/// One Node's Service source address: connections from other Vpcs and to Node
/// addresses leave that Node from it, and its replies come back to it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeAddress {
    pub node: String,
    #[serde(with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub address: Option<Ipv4Addr>,
    /// The Node's VTEP: the other Nodes route the address there.
    #[serde(rename = "nodeIP", with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub node_ip: Option<Ipv4Addr>,
}

impl Subnet {
    /// `spec.cidr` as a prefix (admission refuses one that does not parse).
    pub fn prefix(&self) -> Option<ipnet::Ipv4Net> {
        super::net::parse_cidr(&self.spec.cidr).ok()
    }
}
