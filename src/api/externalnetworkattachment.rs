//! ExternalNetworkAttachment (NAT-02): one Node's address on an ExternalNetwork that a
//! NATGateway uses, `<externalNetwork>--<node>`. Made and deleted by the controller
//! only, one per (such network, Node): the source of every connection that Node's Pods
//! make through the gateway, answered by that Node alone (an ARPAdvertisement
//! `ena-<name>`). Its address comes from the same allocator as the ElasticIPs of the
//! network, so the two never collide.
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
    kind = "ExternalNetworkAttachment",
    shortname = "ena",
    status = "ExternalNetworkAttachmentStatus",
    printcolumn(
        name = "EXTERNALNETWORK",
        type_ = "string",
        json_path = ".spec.externalNetwork"
    ),
    printcolumn(name = "NODE", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(name = "ADDRESS", type_ = "string", json_path = ".status.assignedIP"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExternalNetworkAttachmentSpec {
    pub external_network: String,
    pub node_name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalNetworkAttachmentStatus {
    /// Dotted IPv4 from the ExternalNetwork's pools; empty while none is free. Kept
    /// once given, for as long as the Node is there.
    #[serde(default, rename = "assignedIP", with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub assigned_ip: Option<std::net::Ipv4Addr>,
    /// `Ready` (an address, announced by the Node); False says why (a pool too small
    /// for the Nodes names the pools to grow). `PortsExhausted` is the Node's daemon's:
    /// True while new connections find no free source port on the address.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// The condition the Node's daemon owns on its attachment (`node::nat_ports`): True
/// while new connections find no free source port on its address (NAT-02). The
/// controller, which owns `Ready`, carries it over.
pub const PORTS_EXHAUSTED: &str = "PortsExhausted";

/// `<externalNetwork>--<node>`.
pub fn name_for(external_network: &str, node: &str) -> String {
    format!("{external_network}--{node}")
}

/// The name of the ARPAdvertisement that announces an attachment's address.
pub fn advertisement_name(attachment: &str) -> String {
    format!("ena-{attachment}")
}
