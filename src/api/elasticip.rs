//! ElasticIP (seed 003, EIP-04): one public address from an ExternalNetwork, held by
//! one NetworkInterface directly (no NAT) or by one ElasticIPAttachment (1:1 NAT).
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

pub const PHASE_PENDING: &str = "Pending";
pub const PHASE_AVAILABLE: &str = "Available";
pub const PHASE_ATTACHED: &str = "Attached";
pub const PHASE_ERROR: &str = "Error";

/// Keeps the address while a NetworkInterface still names the ElasticIP (EIP-19).
pub const FINALIZER: &str = "elasticip.juneau.loutres.me/allocation-claim";

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "ElasticIP",
    namespaced,
    shortname = "eip",
    status = "ElasticIPStatus",
    printcolumn(
        name = "EXTERNALNETWORK",
        type_ = "string",
        json_path = ".spec.externalNetwork"
    ),
    printcolumn(name = "ADDRESS", type_ = "string", json_path = ".status.address"),
    printcolumn(
        name = "ATTACHMENTKIND",
        type_ = "string",
        json_path = ".status.attachment.kind"
    ),
    printcolumn(
        name = "ATTACHMENT",
        type_ = "string",
        json_path = ".status.attachment.name"
    ),
    printcolumn(name = "PHASE", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "ALLOCATED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Allocated\")].status"
    ),
    printcolumn(
        name = "ATTACHED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Attached\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ElasticIPSpec {
    pub external_network: String,
    /// An address of the ExternalNetwork's pools to take; empty: the first free one.
    #[serde(
        default,
        rename = "requestedIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub requested_ip: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ElasticIPStatus {
    /// Dotted IPv4, no prefix; unset (`""`) until allocated.
    #[serde(default, with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub address: Option<std::net::Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Attachment>,
    /// `Pending`, `Available`, `Attached`, `Error`.
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// Who holds the address: `NetworkInterface` (direct) or `ElasticIPAttachment` (NAT),
/// by name in the ElasticIP's namespace.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Attachment {
    pub kind: String,
    pub name: String,
}
