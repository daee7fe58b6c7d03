//! Vpc, and the two ways Vpcs reach each other (VpcPeering, TransitGateway), whose
//! CIDRs the overlap checks of L2-08 read.
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "Vpc",
    status = "VpcStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct VpcSpec {
    /// Pods of this Vpc must carry SecurityGroups (not required on NICs of gateway-less
    /// L2Networks: L2-19).
    #[serde(default)]
    pub enforce_security_groups: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_pool: Option<EndpointPool>,
    /// The cluster's Services for this Vpc's Pods. Without it they reach no ClusterIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<VpcService>,
}

/// `spec.service` of a Vpc (SVC-01, SVC-02).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpcService {
    /// The Vpc's Pods reach every ClusterIP Service of the cluster.
    #[serde(default)]
    pub consume: bool,
    /// This Vpc provides backends to others (its Pods, and the Nodes' addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ServiceProvider>,
}

/// How a consumer in another Vpc reaches this Vpc's backends (SVC-02).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceProvider {
    /// A Subnet of this Vpc: each Node's source address for connections from other
    /// Vpcs to backends here comes from it.
    pub nat_source_subnet: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct EndpointPool {
    pub cidrs: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VpcStatus {
    #[serde(default)]
    pub main_route_table: String,
}

/// Two Vpcs whose Subnets route to each other.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "VpcPeering"
)]
pub struct VpcPeeringSpec {
    pub vpcs: Vec<String>,
}

/// Vpcs that reach each other through one gateway.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "TransitGateway"
)]
pub struct TransitGatewaySpec {
    pub vpcs: Vec<String>,
}
