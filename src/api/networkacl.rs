//! NetworkACL (POL-01): rules bound to a Subnet or a gateway L2Network by their
//! `spec.networkACL`, acting on traffic that crosses the gateway, statefully. An omitted
//! direction allows everything, `[]` denies everything, otherwise the first entry by
//! priority that matches decides and no match denies.
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::policy_rule::{PortSpec, Protocol};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "NetworkACL",
    status = "NetworkAclStatus",
    printcolumn = r#"{"name":"VPC","type":"string","jsonPath":".spec.vpc"}"#,
    printcolumn = r#"{"name":"ID","type":"integer","jsonPath":".status.aclID"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
pub struct NetworkACLSpec {
    /// Immutable.
    pub vpc: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<AclRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<AclRule>>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct AclRule {
    /// 1-65535, unique in its direction; the lowest that matches decides.
    pub priority: u32,
    /// `allow` or `deny`.
    pub action: String,
    #[serde(default)]
    pub protocol: Protocol,
    /// The peer's prefix (the destination for egress, the source for ingress);
    /// normalised; empty is `0.0.0.0/0`.
    #[serde(default)]
    pub cidr: String,
    /// TCP and UDP only; empty is every port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAclStatus {
    /// The rule set's id in every Node's datapath (shared with SecurityGroups'
    /// `groupID`), written at the gateway boundary; stable while the object lives.
    #[serde(default, rename = "aclID")]
    pub acl_id: u32,
    /// The generation of the spec the datapath is given.
    #[serde(default)]
    pub ruleset_version: String,
    #[serde(default)]
    pub ingress_rules: u32,
    #[serde(default)]
    pub egress_rules: u32,
    /// Entries as the reference counts them: max(1, #ports) per rule.
    #[serde(default)]
    pub ingress_entries: u32,
    #[serde(default)]
    pub egress_entries: u32,
    /// Subnets and L2Networks whose `spec.networkACL` names it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached: Vec<String>,
    /// `Ready`, `RulesValid`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
