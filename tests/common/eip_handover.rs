//! The standalone cluster of an ElasticIP handover: AddressPool, ExternalNetwork and
//! ElasticIP `vm-eip` (10.99.0.110-119, ARP mode) on the given Nodes with the upstream
//! router and client, and the launcher Pods of one VM naming it (the same allocation
//! identity). Shared by `tests/eip_handover.rs` and `harness/benches/eip_failover.rs`.
use juneau::{
    scenario::Layer,
    standalone::{PodDef, Scenario},
};

/// The first address of the pool: what `vm-eip` gets.
pub const EIP: &str = "10.99.0.110";

pub fn scenario(description: &str, nodes: &[&str]) -> Scenario {
    let obj = |kind: &str, name: &str, spec: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1",
            "kind": kind,
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        })
    };
    Scenario {
        description: description.into(),
        layer: Layer::Stack,
        proves: vec!["EIP-20".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        objects: vec![
            obj(
                "AddressPool",
                "ho-lan",
                serde_json::json!({"advertiseMode": "arp", "addresses": ["10.99.0.110-10.99.0.119"]}),
            ),
            obj(
                "ExternalNetwork",
                "ho-ext",
                serde_json::json!({"type": "arp", "addressPools": ["ho-lan"]}),
            ),
            obj(
                "ElasticIP",
                "vm-eip",
                serde_json::json!({"externalNetwork": "ho-ext"}),
            ),
        ],
        pods: Vec::new(),
        outside: juneau::scenario::Outside::Router,
    }
}

/// A launcher Pod of VM `vm` on `node`, naming `vm-eip`.
pub fn launcher(name: &str, node: &str) -> PodDef {
    PodDef {
        name: name.into(),
        namespace: "default".into(),
        node: node.into(),
        annotations: [
            ("juneau.loutres.me/elastic-ip", "vm-eip"),
            ("juneau.loutres.me/allocation-identity", "vmi.vm"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
        labels: Default::default(),
        ports: Default::default(),
        segment: None,
        addresses: Vec::new(),
        bridge_hosts: Vec::new(),
    }
}
