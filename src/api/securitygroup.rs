//! SecurityGroup (POL-02): allow-only rules on NICs of Subnets and gateway L2Networks
//! (the `security-groups` annotation, or a `networks` entry's `securityGroups`, at most
//! 2 per NIC). Peers are prefixes or other groups of the same Vpc, whose members are
//! the NICs that carry them. An omitted or empty ingress denies; an omitted egress
//! allows, `[]` denies; the entries of a direction are OR-combined.
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
    kind = "SecurityGroup",
    status = "SecurityGroupStatus",
    printcolumn = r#"{"name":"VPC","type":"string","jsonPath":".spec.vpc"}"#,
    printcolumn = r#"{"name":"ID","type":"integer","jsonPath":".status.groupID"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
pub struct SecurityGroupSpec {
    pub vpc: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<SgIngressRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<SgEgressRule>>,
}

/// Allows traffic from any of `from` (empty: from anywhere).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct SgIngressRule {
    #[serde(default)]
    pub from: Vec<SgPeer>,
    #[serde(default)]
    pub protocol: Protocol,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortSpec>,
}

/// Allows traffic to any of `to` (empty: to anywhere).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct SgEgressRule {
    #[serde(default)]
    pub to: Vec<SgPeer>,
    #[serde(default)]
    pub protocol: Protocol,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortSpec>,
}

/// Exactly one of a prefix and a group of the same Vpc.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SgPeer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_ref: Option<SgRef>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct SgRef {
    pub name: String,
}

/// One rule of either direction, as the compiler and admission read them.
pub struct SgRuleView<'a> {
    pub peers: &'a [SgPeer],
    pub protocol: &'a Protocol,
    pub ports: &'a [PortSpec],
}

impl SgIngressRule {
    pub fn view(&self) -> SgRuleView<'_> {
        SgRuleView {
            peers: &self.from,
            protocol: &self.protocol,
            ports: &self.ports,
        }
    }
}

impl SgEgressRule {
    pub fn view(&self) -> SgRuleView<'_> {
        SgRuleView {
            peers: &self.to,
            protocol: &self.protocol,
            ports: &self.ports,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    /// The rule set's id in every Node's datapath (shared with NetworkACLs' `aclID`).
    #[serde(default, rename = "groupID")]
    pub group_id: u32,
    /// The generation of the spec the datapath is given.
    #[serde(default)]
    pub ruleset_version: String,
    #[serde(default)]
    pub ingress_rules: u32,
    #[serde(default)]
    pub egress_rules: u32,
    /// Entries as the reference counts them: max(1, #peers) x max(1, #ports) per rule.
    #[serde(default)]
    pub ingress_entries: u32,
    #[serde(default)]
    pub egress_entries: u32,
    /// NICs that carry the group (namespace/name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached_interfaces: Vec<String>,
    /// The addresses of those NICs (every Node's): what a `securityGroupRef` to this
    /// group matches. The controller keeps it as Pods come and go; the daemons read
    /// it, since each reads only its own Node's NICs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// `Ready`, `RulesValid`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
