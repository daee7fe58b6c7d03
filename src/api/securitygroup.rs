//! SecurityGroup: the shape Pod NIC references need.
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "SecurityGroup"
)]
pub struct SecurityGroupSpec {
    pub vpc: String,
    #[serde(default)]
    pub ingress: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<serde_json::Value>>,
}
