//! L2Network (seed 000): a pure L2 segment stretched over every Node.
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
    kind = "L2Network",
    shortname = "l2net",
    status = "L2NetworkStatus",
    printcolumn(name = "VPC", type_ = "string", json_path = ".spec.vpc"),
    printcolumn(name = "CIDR", type_ = "string", json_path = ".spec.cidr"),
    printcolumn(name = "MTU", type_ = "integer", json_path = ".status.mtu"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct L2NetworkSpec {
    /// Required, immutable; never the default Vpc (L2-04, L2-05).
    pub vpc: String,
    /// IPv4, /16 to /28, normalized; immutable (L2-07). Absent: pure L2, no addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// Connects the segment to the Vpc (needs `cidr`: L2-10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<L2Gateway>,
    /// 576 to 9000; default `--default-l2-mtu` (L2-21).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// A NetworkACL of the same Vpc, acting at the gateway only (L2-20).
    #[serde(
        default,
        rename = "networkACL",
        skip_serializing_if = "Option::is_none"
    )]
    pub network_acl: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct L2Gateway {
    /// Default: the first address of `cidr` (L2-11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Default: the Vpc's main RouteTable (L2-12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_table: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct L2NetworkStatus {
    /// From the `subnet-vni` AllocationPool, shared with Subnets (L2-22).
    #[serde(default)]
    pub vni: u32,
    /// Effective MTU.
    #[serde(default)]
    pub mtu: u32,
    /// Resolved gateway address; unset (`""`) without a gateway.
    #[serde(default, with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub gateway: Option<std::net::Ipv4Addr>,
    /// Chosen once, stable while the gateway exists.
    #[serde(default, rename = "gatewayMAC", with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub gateway_mac: Option<super::net::Mac>,
    /// The NetworkACL's id in the datapath and the version of its rules (L2-23).
    #[serde(
        default,
        rename = "networkACL",
        skip_serializing_if = "Option::is_none"
    )]
    pub network_acl: Option<AclRef>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AclRef {
    #[serde(rename = "aclID")]
    pub acl_id: u32,
    pub ruleset_version: String,
}

impl L2Network {
    /// `spec.cidr` as a prefix: `None` without one (or, past admission never, one that
    /// does not parse).
    pub fn prefix(&self) -> Option<ipnet::Ipv4Net> {
        super::net::parse_cidr(self.spec.cidr.as_deref()?).ok()
    }

    /// The gateway's address, for an L2Network with a gateway and a CIDR: the one
    /// written, else the CIDR's first host (L2-11).
    pub fn gateway_address(&self) -> Option<std::net::Ipv4Addr> {
        let g = self.spec.gateway.as_ref()?;
        let net = self.prefix()?;
        match g.address.as_deref() {
            Some(a) => a.parse().ok(),
            None => Some(super::net::first_host(&net)),
        }
    }
}
