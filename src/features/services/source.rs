//! Each Node's Service source address (SVC-02): in every provider Vpc's
//! `spec.service.provider.natSourceSubnet`, one address per Node that has a Pod NIC
//! (a NetworkEndpoint, which names the Node and its VTEP), the highest free address of
//! the Subnet (the Pods take the lowest), out of the Pods' addresses. An address stays its Node's while the Node has
//! an endpoint; the Pods' IPAM holds them out (`pod::Pools`). Recorded in the Subnet's
//! `status.nodeAddresses`, where every daemon reads its own (the source of its
//! connections through its stack) and the others' (routed to their VTEP).
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use crate::{
    alloc::Pool,
    api::{NetworkEndpoint, NetworkInterface, subnet::NodeAddress},
    cluster::Snapshot,
};

/// The Subnets that give source addresses: every provider Vpc's `natSourceSubnet`
/// that is a Subnet of that Vpc.
pub fn source_subnets(snap: &Snapshot) -> BTreeSet<String> {
    snap.vpcs
        .iter()
        .filter_map(|v| {
            let name = v.metadata.name.as_deref()?;
            let subnet = &v
                .spec
                .service
                .as_ref()?
                .provider
                .as_ref()?
                .nat_source_subnet;
            snap.subnet(subnet)
                .filter(|s| s.spec.vpc == name)
                .map(|_| subnet.clone())
        })
        .collect()
}

/// Subnet -> its Nodes' addresses. `snap`: the objects with this pass's statuses (the
/// addresses written before); `interfaces`: this pass's NICs.
pub fn reconcile(
    snap: &Snapshot,
    endpoints: &[NetworkEndpoint],
    interfaces: &[NetworkInterface],
) -> BTreeMap<String, Vec<NodeAddress>> {
    let nodes: BTreeMap<&str, Ipv4Addr> = endpoints
        .iter()
        .filter(|e| !e.spec.node_name.is_empty())
        .filter_map(|e| Some((e.spec.node_name.as_str(), e.spec.node_ip?)))
        .collect();
    let mut out = BTreeMap::new();
    for name in source_subnets(snap) {
        let Some(subnet) = snap.subnet(&name) else {
            continue;
        };
        let Some(cidr) = subnet.prefix() else {
            continue;
        };
        let gateway = subnet.status.as_ref().and_then(|s| s.gateway);
        // The Nodes' addresses fill the Subnet from its top, the Pods' from its bottom
        // (first fit), so neither moves the other's.
        let mut pool = Pool::hosts(cidr);
        if let Some(g) = gateway {
            pool.reserve(g);
        }
        for a in interfaces
            .iter()
            .filter(|n| n.spec.subnet.as_deref() == Some(name.as_str()))
            .filter_map(NetworkInterface::ip)
        {
            pool.hold(a);
        }
        let before: BTreeMap<String, Ipv4Addr> = subnet
            .status
            .iter()
            .flat_map(|s| &s.node_addresses)
            .filter_map(|a| Some((a.node.clone(), a.address?)))
            .collect();
        let mut addresses = Vec::new();
        // Kept first (stable), then the new Nodes, by name.
        for (node, vtep) in &nodes {
            if let Some(ip) = before.get(*node)
                && !pool.is_held(*ip)
            {
                pool.hold(*ip);
                addresses.push(NodeAddress {
                    node: (*node).to_owned(),
                    address: Some(*ip),
                    node_ip: Some(*vtep),
                });
            }
        }
        for (node, vtep) in &nodes {
            if addresses.iter().any(|a| a.node == *node) {
                continue;
            }
            match pool.last_free() {
                Some(ip) => {
                    addresses.push(NodeAddress {
                        node: (*node).to_owned(),
                        address: Some(ip),
                        node_ip: Some(*vtep),
                    });
                }
                None => {
                    tracing::warn!(
                        subnet = name,
                        node,
                        "no free address left for a Node's Service source address (SVC-02)"
                    );
                }
            }
        }
        addresses.sort_by(|a, b| a.node.cmp(&b.node));
        out.insert(name, addresses);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        Subnet, Vpc,
        net::shown,
        networkendpoint::NetworkEndpointSpec,
        networkinterface::{NetworkInterfaceSpec, NetworkInterfaceStatus, PodRef},
        subnet::{SubnetSpec, SubnetStatus},
        vpc::{ServiceProvider, VpcService, VpcSpec},
    };

    fn ep(node: &str, vtep: &str) -> NetworkEndpoint {
        NetworkEndpoint::new(
            &format!("p-{node}.eth0"),
            NetworkEndpointSpec {
                kind: "Pod".into(),
                node_name: node.into(),
                node_ip: vtep.parse().ok(),
                ..Default::default()
            },
        )
    }

    fn nic(ip: &str) -> NetworkInterface {
        let mut n = NetworkInterface::new(
            "p.eth0",
            NetworkInterfaceSpec {
                interface: "eth0".into(),
                subnet: Some("default".into()),
                pod_ref: PodRef { name: "p".into() },
                ..Default::default()
            },
        );
        n.status = Some(NetworkInterfaceStatus {
            address: format!("{ip}/16").parse().ok(),
            ..Default::default()
        });
        n
    }

    fn snap(before: Vec<NodeAddress>) -> Snapshot {
        let mut s = Snapshot::default();
        s.vpcs.push(Vpc::new(
            "default",
            VpcSpec {
                service: Some(VpcService {
                    consume: true,
                    provider: Some(ServiceProvider {
                        nat_source_subnet: "default".into(),
                    }),
                }),
                ..Default::default()
            },
        ));
        let mut sub = Subnet::new(
            "default",
            SubnetSpec {
                vpc: "default".into(),
                cidr: "10.16.0.0/16".into(),
                network_acl: None,
            },
        );
        sub.status = Some(SubnetStatus {
            gateway: "10.16.0.1".parse().ok(),
            node_addresses: before,
            ..Default::default()
        });
        s.subnets.push(sub);
        s
    }

    #[test]
    fn svc_02_each_node_gets_a_stable_source_address_out_of_the_pods_addresses() {
        let eps = [ep("node-b", "10.99.0.2"), ep("node-a", "10.99.0.1")];
        let got = reconcile(&snap(vec![]), &eps, &[nic("10.16.0.2")]);
        let addrs: Vec<(&str, String, String)> = got["default"]
            .iter()
            .map(|a| (a.node.as_str(), shown(&a.address), shown(&a.node_ip)))
            .collect();
        // From the top of the Subnet, by Node name; a Pod's address is never taken.
        assert_eq!(
            addrs,
            [
                ("node-a", "10.16.255.254".into(), "10.99.0.1".into()),
                ("node-b", "10.16.255.253".into(), "10.99.0.2".into())
            ]
        );
        let taken = reconcile(&snap(vec![]), &eps, &[nic("10.16.255.254")]);
        assert_eq!(shown(&taken["default"][0].address), "10.16.255.253");
        // Written once, kept; a Node without endpoints gives its address back.
        let again = reconcile(
            &snap(got["default"].clone()),
            &eps[..1],
            &[nic("10.16.0.2")],
        );
        assert_eq!(again["default"].len(), 1);
        assert_eq!(shown(&again["default"][0].address), "10.16.255.253");
        // A Vpc that provides nothing gets nothing.
        let mut none = snap(vec![]);
        none.vpcs[0].spec.service = None;
        assert!(reconcile(&none, &eps, &[]).is_empty());
    }
}
