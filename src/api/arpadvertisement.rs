//! ARPAdvertisement (seed 003, EIP-11): which Node answers ARP for one address of an
//! `arp` ExternalNetwork. Made by the controller only (`eip-<namespace>-<name>` for a
//! directly held ElasticIP), following the holder NIC's Node.
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
    kind = "ARPAdvertisement",
    printcolumn(
        name = "EXTERNALNETWORK",
        type_ = "string",
        json_path = ".spec.externalNetwork"
    ),
    printcolumn(name = "ADDRESS", type_ = "string", json_path = ".spec.address"),
    printcolumn(name = "NODE", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ARPAdvertisementSpec {
    pub external_network: String,
    /// Dotted IPv4 inside one of the ExternalNetwork's pools.
    #[serde(with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub address: Option<std::net::Ipv4Addr>,
    /// The Node that answers; the only field that changes.
    pub node_name: String,
}

/// The name of the ARPAdvertisement of a directly held ElasticIP.
pub fn name_for_eip(namespace: &str, eip: &str) -> String {
    format!("eip-{namespace}-{eip}")
}
