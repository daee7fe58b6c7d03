//! RouteTable: the routes of a Vpc's segments: connected routes written by the controller
//! for every Subnet and gateway segment (L2-14), and the user's (via an endpoint; kinds of
//! later waves are dropped by name).
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

impl Route {
    /// `dst` as a prefix (admission refuses one that does not parse).
    pub fn prefix(&self) -> Option<ipnet::Ipv4Net> {
        super::net::parse_cidr(&self.dst).ok()
    }

    /// The route the NATGateway `default` gives the default Vpc (NAT-01).
    pub fn default_nat() -> Self {
        Route {
            dst: "0.0.0.0/0".into(),
            via: Via {
                type_: "natGateway".into(),
                nat_gateway: Some(super::natgateway::DEFAULT_NAT_GATEWAY.into()),
                ..Default::default()
            },
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Via {
    /// `connected`, `endpoint`, `internetGateway`, `natGateway`, `vpcPeering`, ...
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_network: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// With `type: endpoint`: the NIC that is the next hop, `<namespace>/<pod>.<iface>`
    /// (a router Pod or VM on a Subnet or gateway segment of the same Vpc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// With `type: natGateway`: the NATGateway of the table's Vpc (NAT-01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat_gateway: Option<String>,
}
