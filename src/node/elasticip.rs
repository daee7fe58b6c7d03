//! What the ElasticIP maps of a Node should hold, from the cluster (pure): every
//! direct ElasticIP's holder, from the NetworkEndpoints, and the addresses this Node's
//! ARPAdvertisements give it.
//!
//! ★ After a Node loss two endpoints may carry one address (EIP-23): the reference
//! keeps the last one written. Here the endpoint of the NIC the ElasticIP's status
//! names as its holder wins, whatever the order of writes; an endpoint of any other NIC
//! is ignored.
use std::{collections::BTreeMap, net::Ipv4Addr};

use super::dataplane::Holder;
use crate::cluster::World;

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
        let (Some(addr), Some(mac), Ok(node)) = (
            ep.spec
                .address
                .split('/')
                .next()
                .and_then(|a| a.parse().ok()),
            crate::parse_mac(&ep.spec.mac_address),
            ep.spec.node_ip.parse::<Ipv4Addr>(),
        ) else {
            continue;
        };
        if vni != 0 {
            out.insert(addr, Holder { mac, vni, node });
        }
    }
    // Allocated but held by no NIC (a handover, a Pod not started): known, so that a
    // packet for it is dropped here (EIP_NO_HOLDER) instead of routed back out.
    for e in &world.objects.elastic_ips {
        let Some(addr) = e.status.as_ref().and_then(|s| s.address.parse().ok()) else {
            continue;
        };
        let vni = world.objects.network_id_of(e);
        if vni != 0 {
            out.entry(addr).or_insert(Holder {
                mac: [0; 6],
                vni,
                node: Ipv4Addr::UNSPECIFIED,
            });
        }
    }
    out
}

/// The addresses `node` answers ARP for, each with `mac` (its uplink's).
pub fn arp_answers(world: &World, node: &str, mac: [u8; 6]) -> BTreeMap<Ipv4Addr, [u8; 6]> {
    world
        .objects
        .arp_advertisements
        .iter()
        .filter(|a| a.spec.node_name == node)
        .filter_map(|a| a.spec.address.parse().ok())
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
                address: "10.99.0.100/32".into(),
                mac_address: mac.into(),
                node_name: "n".into(),
                node_ip: node_ip.into(),
                ..Default::default()
            },
        );
        ep.metadata.namespace = Some("default".into());
        ep
    }

    #[test]
    fn eip_23_the_holder_named_by_the_elastic_ip_wins_not_the_last_endpoint_written() {
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
            attachment: Some(Attachment {
                kind: "NetworkInterface".into(),
                name: "new.eth0".into(),
            }),
            ..Default::default()
        });
        w.objects.elastic_ips.push(eip);
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
                node: Ipv4Addr::new(10, 99, 0, 2)
            }
        );
        assert_eq!(h.len(), 1);
        // Its holder's endpoint gone: still known, held nowhere.
        let eps = std::mem::take(&mut w.endpoints);
        w.objects.elastic_ips[0].status.as_mut().unwrap().address = "10.99.0.100".into();
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
    fn eip_11_a_node_answers_only_for_its_own_advertisements() {
        let mut w = World::default();
        for (addr, node) in [("10.99.0.100", "node-a"), ("10.99.0.101", "node-b")] {
            w.objects.arp_advertisements.push(ARPAdvertisement::new(
                &format!("eip-default-{addr}"),
                ARPAdvertisementSpec {
                    external_network: "ext".into(),
                    address: addr.into(),
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
