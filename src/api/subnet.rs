//! Subnet: the fields the L2Network overlap checks read, and its VNI.
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "Subnet",
    status = "SubnetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSpec {
    pub vpc: String,
    pub cidr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_acl: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct SubnetStatus {
    #[serde(default)]
    pub vni: u32,
}
