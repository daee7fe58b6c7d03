//! NetworkACL: the shape L2Network references need (rules act at the gateway).
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "NetworkACL",
    status = "NetworkAclStatus"
)]
pub struct NetworkACLSpec {
    pub vpc: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<AclRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<AclRule>>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct AclRule {
    pub priority: u32,
    pub action: String,
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub cidr: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAclStatus {
    #[serde(default, rename = "aclID")]
    pub acl_id: u32,
    #[serde(default)]
    pub ruleset_version: String,
}
