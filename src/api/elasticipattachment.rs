//! ElasticIPAttachment (seed 003): 1:1 NAT between a Subnet NIC's address and an
//! ElasticIP. Its NAT datapath is later work; the kind exists so that an ElasticIP used
//! both ways is detected (EIP-02, EIP-22) and its status says so.
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "ElasticIPAttachment",
    namespaced,
    shortname = "eipa",
    status = "ElasticIPAttachmentStatus",
    printcolumn(
        name = "ELASTICIP",
        type_ = "string",
        json_path = ".spec.elasticIPRef.name"
    ),
    printcolumn(
        name = "NETWORKINTERFACE",
        type_ = "string",
        json_path = ".spec.targetRef.networkInterfaceName"
    ),
    printcolumn(name = "EIP", type_ = "string", json_path = ".status.elasticIP"),
    printcolumn(name = "PODIP", type_ = "string", json_path = ".status.podIP"),
    printcolumn(name = "NODE", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(name = "PHASE", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ElasticIPAttachmentSpec {
    #[serde(rename = "elasticIPRef")]
    pub elastic_ip_ref: NameRef,
    pub target_ref: TargetRef,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct NameRef {
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    pub network_interface_name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ElasticIPAttachmentStatus {
    #[serde(default, rename = "elasticIP", with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub elastic_ip: Option<std::net::Ipv4Addr>,
    #[serde(default, rename = "podIP", with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub pod_ip: Option<std::net::Ipv4Addr>,
    #[serde(default)]
    pub node_name: String,
    /// `Pending`, `Attached`, `Error`.
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
