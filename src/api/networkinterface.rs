//! NetworkInterface `<pod>.<iface>`: one per Pod NIC, made by the Pod controller.
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use ipnet::Ipv4Net;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "NetworkInterface",
    namespaced,
    status = "NetworkInterfaceStatus",
    printcolumn(name = "NODE", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(name = "SUBNET", type_ = "string", json_path = ".spec.subnet"),
    printcolumn(name = "L2NETWORK", type_ = "string", json_path = ".spec.l2Network"),
    printcolumn(name = "ELASTICIP", type_ = "string", json_path = ".spec.elasticIP"),
    printcolumn(name = "ADDRESS", type_ = "string", json_path = ".status.address"),
    printcolumn(name = "PHASE", type_ = "string", json_path = ".status.phase"),
    // A node daemon lists and watches only its own Node's NICs.
    selectable = ".spec.nodeName"
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceSpec {
    /// The interface name inside the Pod (`eth0`, `eth1`, ...).
    pub interface: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_network: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "elasticIP")]
    pub elastic_ip: Option<String>,
    /// Requested address; allocated from the segment's `cidr` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<String>,
    pub pod_ref: PodRef,
    #[serde(default)]
    pub node_name: String,
    /// NICs with the same identity are one workload's (KubeVirt: `vmi.<VM name>`): a new
    /// one may wait for an ElasticIP its predecessor still holds (EIP-20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_identity: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct PodRef {
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceStatus {
    /// `<ip>/<prefix>`; unset (`""`) on a cidr-less segment (L2-25).
    #[serde(default, with = "super::net::or_empty")]
    #[schemars(with = "String")]
    pub address: Option<Ipv4Net>,
    /// Segment MTU for L2Network NICs; 0 keeps the kernel default.
    #[serde(default)]
    pub mtu: u32,
    #[serde(default)]
    pub vni: u32,
    #[serde(default)]
    pub routes: Vec<NicRoute>,
    /// Policy rules the NIC needs (a secondary ElasticIP NIC's `from <EIP> lookup N`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<NicRule>,
    /// `Pending`, `Allocated`, `Ready`, `Failed`.
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NicRoute {
    pub dst: String,
    pub gw: String,
    /// The gateway is reached on the link without a route to it (169.254.0.1).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_link: bool,
    /// Routing table; 0 is the main table.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `ip rule add from <from> lookup <table> priority <priority>`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct NicRule {
    pub from: String,
    pub table: u32,
    pub priority: u32,
}

impl NetworkInterface {
    /// Where the NIC stands among its Pod's: by interface name, its trailing number
    /// read as a number (`eth0`, `net2`, `net10`), so that a Pod's NICs come in one
    /// order whatever order the store holds them in (a Pod whose NICs were made at
    /// different passes).
    pub fn order_key(&self) -> (&str, u64, &str) {
        let name = self.spec.interface.as_str();
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let number = name[stem.len()..].parse().unwrap_or(0);
        (stem, number, name)
    }

    /// The NIC's address, once the controller allocated one.
    pub fn ip(&self) -> Option<std::net::Ipv4Addr> {
        Some(self.status.as_ref()?.address?.addr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(interface: &str) -> NetworkInterface {
        NetworkInterface::new(
            &format!("web.{interface}"),
            NetworkInterfaceSpec {
                interface: interface.into(),
                pod_ref: PodRef { name: "web".into() },
                ..Default::default()
            },
        )
    }

    #[test]
    fn l2_24_a_pods_nics_come_by_interface_name_then_number() {
        let mut nics = ["net10", "eth0", "net2", "lab", "net1"].map(nic).to_vec();
        nics.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        let order: Vec<&str> = nics.iter().map(|n| n.spec.interface.as_str()).collect();
        assert_eq!(order, ["eth0", "lab", "net1", "net2", "net10"]);
    }
}
