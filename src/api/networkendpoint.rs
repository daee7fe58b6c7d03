//! NetworkEndpoint: written by the node daemon when a NIC is really attached. Its MAC
//! is informational: the learning table is never filled from it (L2-29).
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::net::Mac;

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "NetworkEndpoint",
    namespaced,
    printcolumn(name = "KIND", type_ = "string", json_path = ".spec.kind"),
    printcolumn(name = "NODE", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(name = "SUBNET", type_ = "string", json_path = ".spec.subnet"),
    printcolumn(name = "L2NETWORK", type_ = "string", json_path = ".spec.l2Network"),
    printcolumn(name = "ADDRESS", type_ = "string", json_path = ".spec.address")
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkEndpointSpec {
    /// `Pod`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_network: Option<String>,
    /// A direct ElasticIP NIC: the ElasticIP (of the endpoint's namespace) it carries.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "elasticIP")]
    pub elastic_ip: Option<String>,
    /// The NIC's `<ip>/<prefix>` (its NetworkInterface's); unset on a cidr-less segment.
    #[serde(default, with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub address: Option<Ipv4Net>,
    #[serde(default, with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub mac_address: Option<Mac>,
    pub node_name: String,
    /// The Node's VTEP (underlay address), so other Nodes add it to the segment's
    /// remote list.
    #[serde(default, with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub node_ip: Option<Ipv4Addr>,
}
