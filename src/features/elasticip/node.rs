//! What the ElasticIP maps of a Node should hold, from the cluster (pure): every
//! direct ElasticIP's holder, from the NetworkEndpoints, every attached one's (1:1 NAT,
//! NAT-03), and the addresses this Node's ARPAdvertisements give it.
//!
//! ★ After a Node loss two endpoints may carry one address (EIP-23): the reference
//! keeps the last one written. Here the endpoint of the NIC the ElasticIP's status
//! names as its holder wins, whatever the order of writes; an endpoint of any other NIC
//! is ignored.
use std::{collections::BTreeMap, net::Ipv4Addr};

use crate::cluster::World;
use crate::node::dataplane::{Holder, PublicAddresses};

pub fn holders(world: &World) -> BTreeMap<Ipv4Addr, Holder> {
    let mut out = BTreeMap::new();
    for ep in &world.endpoints {
        let Some(name) = &ep.spec.elastic_ip else {
            continue;
        };
        let ns = ep.metadata.namespace.as_deref().unwrap_or("default");
        let Some(eip) = world.objects.elastic_ip(ns, name) else {
            continue;
        };
        let holder = eip.status.as_ref().and_then(|s| s.attachment.as_ref());
        if holder.is_none_or(|a| {
            a.kind != "NetworkInterface" || Some(&a.name) != ep.metadata.name.as_ref()
        }) {
            continue;
        }
        let vni = world.objects.network_id_of(eip);
        let (Some(addr), Some(mac), Some(node)) = (
            ep.spec.address.map(|a| a.addr()),
            ep.spec.mac_address.map(|m| m.0),
            ep.spec.node_ip,
        ) else {
            continue;
        };
        if vni != 0 {
            out.insert(
                addr,
                Holder {
                    mac,
                    vni,
                    node,
                    pod_ip: None,
                },
            );
        }
    }
    for (eip, holder) in crate::node::egress::attached(world) {
        out.insert(eip, holder);
    }
    // Allocated but held by no NIC (a handover, a Pod not started): known, so that a
    // packet for it is dropped here (EIP_NO_HOLDER) instead of routed back out.
    for e in &world.objects.elastic_ips {
        let Some(addr) = e.status.as_ref().and_then(|s| s.address) else {
            continue;
        };
        let vni = world.objects.network_id_of(e);
        if vni != 0 {
            out.entry(addr).or_insert(Holder {
                mac: [0; 6],
                vni,
                node: Ipv4Addr::UNSPECIFIED,
                pod_ip: None,
            });
        }
    }
    out
}

/// The ElasticIP attached to each Subnet NIC, by the NIC's (VNI, address): what its
/// port carries for the way out via the internet gateway.
pub fn public_addresses(holders: &BTreeMap<Ipv4Addr, Holder>) -> PublicAddresses {
    holders
        .iter()
        .filter_map(|(eip, h)| Some(((h.vni, h.pod_ip?), *eip)))
        .collect()
}

/// The addresses `node` answers ARP for, each with `mac` (its uplink's).
pub fn arp_answers(world: &World, node: &str, mac: [u8; 6]) -> BTreeMap<Ipv4Addr, [u8; 6]> {
    world
        .objects
        .arp_advertisements
        .iter()
        .filter(|a| a.spec.node_name == node)
        .filter_map(|a| a.spec.address)
        .map(|ip| (ip, mac))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        ARPAdvertisement, ElasticIP, ExternalNetwork, NetworkEndpoint,
        arpadvertisement::ARPAdvertisementSpec,
        elasticip::{Attachment, ElasticIPSpec, ElasticIPStatus},
        externalnetwork::{ExternalNetworkSpec, ExternalNetworkStatus},
        networkendpoint::NetworkEndpointSpec,
    };

    fn endpoint(name: &str, node_ip: &str, mac: &str) -> NetworkEndpoint {
        let mut ep = NetworkEndpoint::new(
            name,
            NetworkEndpointSpec {
                kind: "Pod".into(),
                elastic_ip: Some("web-eip".into()),
                address: "10.99.0.100/32".parse().ok(),
                mac_address: mac.parse().ok(),
                node_name: "n".into(),
                node_ip: node_ip.parse().ok(),
                ..Default::default()
            },
        );
        ep.metadata.namespace = Some("default".into());
        ep
    }

    /// ExternalNetwork ext (networkID 4097) and its ElasticIP web-eip at `address`
    /// (empty: none yet), whose status names its holder of `kind` and `name`.
    fn with_elastic_ip(address: &str, kind: &str, name: &str) -> World {
        let mut w = World::default();
        let mut net = ExternalNetwork::new("ext", ExternalNetworkSpec::default());
        net.status = Some(ExternalNetworkStatus {
            network_id: 4097,
            ..Default::default()
        });
        w.objects.external_networks.push(net);
        let mut eip = ElasticIP::new(
            "web-eip",
            ElasticIPSpec {
                external_network: "ext".into(),
                requested_ip: None,
            },
        );
        eip.metadata.namespace = Some("default".into());
        eip.status = Some(ElasticIPStatus {
            address: address.parse().ok(),
            attachment: Some(Attachment {
                kind: kind.into(),
                name: name.into(),
            }),
            ..Default::default()
        });
        w.objects.elastic_ips.push(eip);
        w
    }

    #[test]
    fn eip_23_the_holder_named_by_the_elastic_ip_wins_not_the_last_endpoint_written() {
        let mut w = with_elastic_ip("", "NetworkInterface", "new.eth0");
        // The lost Node's endpoint is still there, written after the new one.
        w.endpoints
            .push(endpoint("new.eth0", "10.99.0.2", "02:00:00:00:00:02"));
        w.endpoints
            .push(endpoint("old.eth0", "10.99.0.1", "02:00:00:00:00:01"));
        let h = holders(&w);
        assert_eq!(
            h[&Ipv4Addr::new(10, 99, 0, 100)],
            Holder {
                mac: [2, 0, 0, 0, 0, 2],
                vni: 4097,
                node: Ipv4Addr::new(10, 99, 0, 2),
                pod_ip: None,
            }
        );
        assert_eq!(h.len(), 1);
        // Its holder's endpoint gone: still known, held nowhere.
        let eps = std::mem::take(&mut w.endpoints);
        w.objects.elastic_ips[0].status.as_mut().unwrap().address = "10.99.0.100".parse().ok();
        assert_eq!(
            holders(&w)[&Ipv4Addr::new(10, 99, 0, 100)].node,
            Ipv4Addr::UNSPECIFIED
        );
        w.endpoints = eps;
        // No network yet: nothing to carry with.
        w.objects.external_networks[0].status = None;
        assert!(holders(&w).is_empty());
    }

    #[test]
    fn nat_03_an_attached_address_is_written_with_its_pod_and_subnet_vni() {
        use crate::api::{
            ElasticIPAttachment, NetworkInterface,
            elasticipattachment::{
                ElasticIPAttachmentSpec, ElasticIPAttachmentStatus, NameRef, TargetRef,
            },
            networkinterface::{NetworkInterfaceSpec, NetworkInterfaceStatus},
        };
        let mut w = with_elastic_ip("192.0.2.10", "ElasticIPAttachment", "nat");
        let mut a = ElasticIPAttachment::new(
            "nat",
            ElasticIPAttachmentSpec {
                elastic_ip_ref: NameRef {
                    name: "web-eip".into(),
                },
                target_ref: TargetRef {
                    network_interface_name: "app.eth0".into(),
                },
            },
        );
        a.metadata.namespace = Some("default".into());
        a.status = Some(ElasticIPAttachmentStatus {
            elastic_ip: "192.0.2.10".parse().ok(),
            pod_ip: "10.71.0.2".parse().ok(),
            node_name: "node-b".into(),
            phase: "Attached".into(),
            ..Default::default()
        });
        w.objects.elastic_ip_attachments.push(a);
        let mut nic = NetworkInterface::new(
            "app.eth0",
            NetworkInterfaceSpec {
                subnet: Some("web".into()),
                ..Default::default()
            },
        );
        nic.metadata.namespace = Some("default".into());
        nic.status = Some(NetworkInterfaceStatus {
            vni: 7101,
            address: "10.71.0.2/24".parse().ok(),
            ..Default::default()
        });
        w.objects.interfaces.push(nic);
        let mut ep = endpoint("app.eth0", "10.99.0.2", "02:00:00:00:00:07");
        ep.spec.elastic_ip = None;
        ep.spec.address = "10.71.0.2/24".parse().ok();
        w.endpoints.push(ep);
        let eip_addr = Ipv4Addr::new(192, 0, 2, 10);
        let pod = Ipv4Addr::new(10, 71, 0, 2);
        let h = holders(&w);
        assert_eq!(
            h[&eip_addr],
            Holder {
                mac: [2, 0, 0, 0, 0, 7],
                vni: 7101,
                node: Ipv4Addr::new(10, 99, 0, 2),
                pod_ip: Some(pod),
            },
            "carried with the Subnet's VNI to the NIC's Node, given the Pod's address"
        );
        assert_eq!(
            public_addresses(&h),
            BTreeMap::from([((7101, pod), eip_addr)]),
            "the NIC's port leaves from the ElasticIP"
        );
        // Not attached (deleted, waiting, in error): held nowhere, so new packets to
        // it are refused (EIP_NO_HOLDER), and the NIC goes out without it.
        w.objects.elastic_ip_attachments[0]
            .status
            .as_mut()
            .unwrap()
            .phase = "Pending".into();
        let h = holders(&w);
        assert_eq!(
            (h[&eip_addr].node, h[&eip_addr].pod_ip),
            (Ipv4Addr::UNSPECIFIED, None)
        );
        assert!(public_addresses(&h).is_empty());
    }

    #[test]
    fn eip_11_a_node_answers_only_for_its_own_advertisements() {
        let mut w = World::default();
        for (addr, node) in [("10.99.0.100", "node-a"), ("10.99.0.101", "node-b")] {
            w.objects.arp_advertisements.push(ARPAdvertisement::new(
                &format!("eip-default-{addr}"),
                ARPAdvertisementSpec {
                    external_network: "ext".into(),
                    address: addr.parse().ok(),
                    node_name: node.into(),
                },
            ));
        }
        let mac = [2, 0, 0, 0x99, 0, 1];
        assert_eq!(
            arp_answers(&w, "node-a", mac),
            BTreeMap::from([(Ipv4Addr::new(10, 99, 0, 100), mac)])
        );
    }
}
