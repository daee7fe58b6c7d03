//! BGPNodeState (BGP-03): one per Node, named after it, made by the controller while a
//! BGPPeer exists; its status is written by that Node's daemon alone, from what its
//! speaker says: the sessions, what it announces, its errors.
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
    kind = "BGPNodeState",
    status = "BGPNodeStateStatus",
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "BIRD",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"BirdRunning\")].status"
    ),
    printcolumn(name = "UP", type_ = "integer", json_path = ".status.sessionsUp"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    // A node daemon lists and watches only its own Node's.
    selectable = ".spec.nodeName"
)]
#[serde(rename_all = "camelCase")]
pub struct BGPNodeStateSpec {
    /// The Node whose speaker this is (the object is named after it too).
    pub node_name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BGPNodeStateStatus {
    /// The daemon's last write (RFC 3339), at least every 15 s.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub heartbeat: String,
    #[serde(default)]
    pub bgp_sessions: Vec<BgpSession>,
    /// Sessions Up (a printer column: a JSONPath cannot count).
    #[serde(default)]
    pub sessions_up: u32,
    #[serde(default)]
    pub advertisements: Vec<AdvertisementState>,
    #[serde(default)]
    pub errors: Vec<BgpError>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BgpSession {
    pub peer_address: String,
    /// Only when the address is a BGPPeer's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peer_name: String,
    /// `Up`, `Down` or `Unknown`.
    pub state: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub up_since: String,
    /// The last reason the session went down, with the NOTIFICATION's code/subcode.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
    #[serde(default)]
    pub exported_routes: u32,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AdvertisementState {
    pub address_pool: String,
    /// Sorted, unique: what this Node means to announce.
    pub prefixes: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_synced_at: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BgpError {
    pub kind: String,
    pub name: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_seen: String,
}
