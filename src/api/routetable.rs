//! RouteTable: the shape L2Network gateways write their connected route into (L2-14).
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "RouteTable"
)]
#[serde(rename_all = "camelCase")]
pub struct RouteTableSpec {
    pub vpc: String,
    #[serde(default)]
    pub routes: Vec<Route>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Route {
    pub dst: String,
    pub via: Via,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Via {
    /// `connected`, `internetGateway`, `natGateway`, `vpcPeering`, ...
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_network: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}
