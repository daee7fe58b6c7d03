//! What one Node's speaker is to do, from the cluster (pure): peer with every BGPPeer,
//! announce the prefixes of the BGPAdvertisements that name this Node (every Node
//! when none is named): the advertisement's `prefix`, else its bgp pools' CIDRs whole
//! (EIP-12: one route per pool, never one per ElasticIP; any Node carries a frame to
//! the holder over VXLAN).
use std::{collections::BTreeMap, net::Ipv4Addr};

use ipnet::Ipv4Net;

use super::bird::render::{Announce, Bfd, Intent, Peer};
use crate::{
    api::{BGPAdvertisement, externalnetwork::TYPE_BGP, net::parse_cidr},
    cluster::World,
    node::dataplane::Delivery,
};

/// The intent of Node `node` at `node_ip`; objects that cannot be served (a pool not
/// written yet, a peer whose address does not parse) are left out and listed in the
/// second value, one line each, for the Node's errors.
pub fn intent(world: &World, node: &str, node_ip: Ipv4Addr) -> (Intent, Vec<String>) {
    let objects = &world.objects;
    let mut left_out = Vec::new();
    let peers = objects
        .bgp_peers
        .iter()
        .filter_map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            let Some(address) = p.spec.address() else {
                left_out.push(format!(
                    "BGPPeer {name}: peerAddress {:?} is not IPv4",
                    p.spec.peer_address
                ));
                return None;
            };
            Some(Peer {
                name,
                my_asn: p.spec.my_asn,
                peer_asn: p.spec.peer_asn,
                peer_address: address,
                peer_port: u16::try_from(p.spec.port()).unwrap_or(179),
                hold_time: u16::try_from(p.spec.hold()).unwrap_or(90),
                bfd: p.spec.bfd_timers().map(|t| Bfd {
                    interval_ms: t.interval_ms,
                    multiplier: u8::try_from(t.multiplier).unwrap_or(3),
                }),
            })
        })
        .collect();
    let mut prefixes: BTreeMap<Ipv4Net, Vec<String>> = BTreeMap::new();
    for a in objects
        .bgp_advertisements
        .iter()
        .filter(|a| a.spec.announced_by(node))
    {
        let name = a.metadata.name.as_deref().unwrap_or("");
        for (pool, prefix) in announced(world, a, &mut left_out) {
            prefixes
                .entry(prefix)
                .or_default()
                .push(format!("BGPAdvertisement {name} (pool {pool})"));
        }
    }
    let intent = Intent {
        node: node.to_owned(),
        router_id: node_ip,
        local_address: node_ip,
        peers,
        prefixes: prefixes
            .into_iter()
            .map(|(prefix, why)| Announce {
                prefix,
                comment: why.join("; "),
            })
            .collect(),
    };
    (intent, left_out)
}

/// What Node `node` announces, by pool (BGPNodeState's `advertisements`).
pub fn by_pool(world: &World, node: &str) -> BTreeMap<String, Vec<Ipv4Net>> {
    let mut out: BTreeMap<String, Vec<Ipv4Net>> = BTreeMap::new();
    for a in world
        .objects
        .bgp_advertisements
        .iter()
        .filter(|a| a.spec.announced_by(node))
    {
        for (pool, prefix) in announced(world, a, &mut Vec::new()) {
            let v = out.entry(pool).or_default();
            if !v.contains(&prefix) {
                v.push(prefix);
            }
        }
    }
    out.values_mut().for_each(|v| v.sort());
    out
}

/// How Node `node` delivers each prefix some Node announces (EIP-14): `Here` where it
/// announces it too, `Elsewhere` where only Nodes pinned by `nodeName` do. The same
/// prefix announced here and pinned elsewhere is `Here`; between different prefixes
/// the datapath's longest match decides.
pub fn delivery(world: &World, node: &str) -> BTreeMap<Ipv4Net, Delivery> {
    let mut out = BTreeMap::new();
    for a in &world.objects.bgp_advertisements {
        let here = a.spec.announced_by(node);
        for (_, prefix) in announced(world, a, &mut Vec::new()) {
            let d = out.entry(prefix).or_insert(Delivery::Elsewhere);
            if here {
                *d = Delivery::Here;
            }
        }
    }
    out
}

/// The prefixes one advertisement announces, each with its pool.
fn announced(
    world: &World,
    a: &BGPAdvertisement,
    left_out: &mut Vec<String>,
) -> Vec<(String, Ipv4Net)> {
    let name = a.metadata.name.as_deref().unwrap_or("");
    let mut out = Vec::new();
    for pool in &a.spec.address_pools {
        let Some(p) = world
            .objects
            .address_pool(pool)
            .filter(|p| p.spec.advertise_mode == TYPE_BGP)
        else {
            left_out.push(format!(
                "BGPAdvertisement {name}: AddressPool {pool} is missing or not a bgp pool"
            ));
            continue;
        };
        let cidrs: Vec<Ipv4Net> = p
            .spec
            .addresses
            .iter()
            .filter_map(|c| parse_cidr(c).ok())
            .collect();
        match a.spec.prefix.as_deref() {
            Some(prefix) => {
                if let Ok(net) = parse_cidr(prefix)
                    && cidrs.iter().any(|c| c.contains(&net))
                {
                    out.push((pool.clone(), net));
                }
            }
            None => out.extend(cidrs.into_iter().map(|c| (pool.clone(), c))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        AddressPool, BGPPeer, addresspool::AddressPoolSpec, bgpadvertisement::BGPAdvertisementSpec,
        bgppeer::BGPPeerSpec,
    };

    fn world() -> World {
        let mut w = World::default();
        w.objects.address_pools.push(AddressPool::new(
            "wan",
            AddressPoolSpec {
                advertise_mode: "bgp".into(),
                addresses: vec!["203.0.113.0/24".into()],
            },
        ));
        w.objects.bgp_peers.push(BGPPeer::new(
            "upstream",
            BGPPeerSpec {
                my_asn: 64513,
                peer_asn: 64512,
                peer_address: "10.99.0.254".into(),
                ..Default::default()
            },
        ));
        for (name, node, prefix) in [
            ("wan-all", None, None),
            ("wan-b", Some("node-b"), Some("203.0.113.128/25")),
        ] {
            w.objects.bgp_advertisements.push(BGPAdvertisement::new(
                name,
                BGPAdvertisementSpec {
                    address_pools: vec!["wan".into()],
                    node_name: node.map(Into::into),
                    prefix: prefix.map(Into::into),
                },
            ));
        }
        w
    }

    #[test]
    fn bgp_02_a_node_announces_the_pools_of_the_advertisements_that_name_it() {
        let w = world();
        let ip = "10.99.0.1".parse().unwrap();
        let (a, left_out) = intent(&w, "node-a", ip);
        assert!(left_out.is_empty(), "{left_out:?}");
        let shown: Vec<String> = a.prefixes.iter().map(|p| p.prefix.to_string()).collect();
        assert_eq!(shown, ["203.0.113.0/24"], "node-b's /25 is not node-a's");
        assert_eq!((a.router_id, a.local_address), (ip, ip));
        let p = &a.peers[0];
        assert_eq!(
            (p.my_asn, p.peer_asn, p.peer_port, p.hold_time),
            (64513, 64512, 179, 90)
        );
        assert_eq!(
            p.bfd,
            Some(Bfd {
                interval_ms: 100,
                multiplier: 3
            })
        );
        let (b, _) = intent(&w, "node-b", "10.99.0.2".parse().unwrap());
        let shown: Vec<String> = b.prefixes.iter().map(|p| p.prefix.to_string()).collect();
        assert_eq!(shown, ["203.0.113.0/24", "203.0.113.128/25"]);
    }

    #[test]
    fn eip_14_a_range_pinned_to_another_node_is_delivered_elsewhere_inside_a_pool_all_announce() {
        let w = world();
        let net = |s: &str| s.parse::<Ipv4Net>().unwrap();
        assert_eq!(
            delivery(&w, "node-a"),
            BTreeMap::from([
                (net("203.0.113.0/24"), Delivery::Here),
                (net("203.0.113.128/25"), Delivery::Elsewhere),
            ])
        );
        assert_eq!(
            delivery(&w, "node-b"),
            BTreeMap::from([
                (net("203.0.113.0/24"), Delivery::Here),
                (net("203.0.113.128/25"), Delivery::Here),
            ])
        );
        // The same prefix pinned elsewhere and announced here too: here.
        let mut w = world();
        w.objects.bgp_advertisements[1].spec.prefix = None;
        assert_eq!(
            delivery(&w, "node-a"),
            BTreeMap::from([(net("203.0.113.0/24"), Delivery::Here)])
        );
        // Pinned only: elsewhere on the rest, and nothing is here.
        w.objects.bgp_advertisements.remove(0);
        assert_eq!(
            delivery(&w, "node-a"),
            BTreeMap::from([(net("203.0.113.0/24"), Delivery::Elsewhere)])
        );
    }

    #[test]
    fn bgp_02_a_missing_pool_is_left_out_and_said() {
        let mut w = world();
        w.objects.bgp_advertisements[0].spec.address_pools = vec!["later".into()];
        let (a, left_out) = intent(&w, "node-a", "10.99.0.1".parse().unwrap());
        assert!(a.prefixes.is_empty());
        assert_eq!(
            left_out,
            ["BGPAdvertisement wan-all: AddressPool later is missing or not a bgp pool"]
        );
    }
}
