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
    #[schemars(schema_with = "opaque_rules")]
    pub ingress: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_rules")]
    pub egress: Option<Vec<serde_json::Value>>,
}

/// Rules are kept as written until their datapath exists. The API server requires a
/// type for array items (structural schemas): objects whose fields it keeps as given.
fn opaque_rules(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}
