//! NATGateway (NAT-01): a Vpc's way out to the outside, translated (NAPT, N:1) to the
//! address of the Pod's own Node on the gateway's ExternalNetwork. There is no gateway
//! Pod or VM: every Node translates its own Pods' connections (`nat_out`), each from its
//! ExternalNetworkAttachment's address, so the gateway scales with the Nodes and no
//! Node carries another's traffic. A RouteTable route `via: {type: natGateway,
//! natGateway: <name>}` sends traffic to it; the one named `default`, once Ready, gives
//! the default Vpc its `0.0.0.0/0`.
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

/// The NATGateway whose readiness gives the default Vpc a default route (NAT-01).
pub const DEFAULT_NAT_GATEWAY: &str = "default";

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "NATGateway",
    shortname = "natgw",
    status = "NATGatewayStatus",
    printcolumn(name = "VPC", type_ = "string", json_path = ".spec.vpc"),
    printcolumn(
        name = "EXTERNALNETWORK",
        type_ = "string",
        json_path = ".spec.externalNetwork"
    ),
    printcolumn(name = "NODES", type_ = "integer", json_path = ".status.readyNodes"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NATGatewaySpec {
    /// The Vpc whose RouteTables may route to it; immutable.
    pub vpc: String,
    /// The ExternalNetwork whose pools give each Node its address; immutable.
    pub external_network: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NATGatewayStatus {
    /// Nodes with an address on the ExternalNetwork (a Ready attachment), of `nodes`.
    #[serde(default)]
    pub ready_nodes: u32,
    #[serde(default)]
    pub nodes: u32,
    /// `Ready`: the Vpc and the ExternalNetwork exist and at least one Node holds an
    /// address; the message says how many do and names the attachments that wait.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
