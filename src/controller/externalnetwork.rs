//! ExternalNetworks are shared by the ElasticIPs and the NATGateways (both draw
//! addresses from their pools), so they live with the controller, not in a feature.
//! ExternalNetwork status: `networkID`, the VNI of its direct NICs' segment, from the
//! `subnet-vni` pool Subnets and L2Networks share (the datapath keys its tables by VNI
//! alone), chosen once and never changed; Ready once the pools it lists exist and
//! match its type.
use std::collections::BTreeMap;

use crate::controller::segments::{held_vnis, next_vni, oldest_first, vni_exhausted};
use crate::{
    admission::validate::Snapshot,
    api::{
        condition::Condition,
        externalnetwork::{BGP_SPEAKER_ON_NODES, ExternalNetworkStatus, TYPE_BGP},
    },
};

/// Why no address came out of an ExternalNetwork's pools (for an ElasticIP, or a
/// Node's NAT address): the Allocated condition's reason and message.
pub type Unallocated = (&'static str, String);

pub fn reconcile_all(snap: &Snapshot) -> BTreeMap<String, ExternalNetworkStatus> {
    let mut held = held_vnis(snap);
    let mut out = BTreeMap::new();
    for n in oldest_first(&snap.external_networks) {
        let name = n.metadata.name.clone().unwrap_or_default();
        let old = n.status.clone().unwrap_or_default();
        let network_id = if old.network_id != 0 {
            old.network_id
        } else {
            match next_vni(&mut held) {
                Some(v) => v,
                None => {
                    out.insert(
                        name,
                        ExternalNetworkStatus {
                            network_id: 0,
                            conditions: vec![vni_exhausted()],
                        },
                    );
                    continue;
                }
            }
        };
        let ready = match pools_problem(snap, &n.spec.type_, &n.spec.address_pools) {
            None => Condition::new("Ready", true, "Reconciled", ""),
            Some((reason, message)) => Condition::new("Ready", false, reason, message),
        };
        let mut conditions = vec![ready];
        if n.spec.type_ == TYPE_BGP {
            conditions.push(announced(snap, &n.spec.address_pools));
        }
        out.insert(
            name,
            ExternalNetworkStatus {
                network_id,
                conditions,
            },
        );
    }
    out
}

/// Whether a bgp network's addresses are announced (EIP-12): every pool by a
/// BGPAdvertisement, by Nodes that run a speaker. Without, its ElasticIPs are
/// unreachable from outside, and this says so rather than leave it to be found.
fn announced(snap: &Snapshot, pools: &[String]) -> Condition {
    if !BGP_SPEAKER_ON_NODES {
        return Condition::new(
            "Announced",
            false,
            "NoSpeaker",
            "the Nodes run no BGP speaker yet (issue 27): nothing announces this network's addresses, its ElasticIPs are unreachable from outside",
        );
    }
    let missing: Vec<&str> = pools
        .iter()
        .filter(|p| {
            !snap
                .bgp_advertisements
                .iter()
                .any(|a| a.spec.address_pools.contains(p))
        })
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Condition::new("Announced", true, "Advertised", "")
    } else {
        Condition::new(
            "Announced",
            false,
            "NoBGPAdvertisement",
            format!(
                "AddressPools {} are in no BGPAdvertisement: their ElasticIPs are unreachable from outside; add one",
                missing.join(", ")
            ),
        )
    }
}

/// Why the pools of an ExternalNetwork of `type_` cannot hand out addresses, if they
/// cannot: the reason and message ElasticIPs report too.
pub fn pools_problem(
    snap: &Snapshot,
    type_: &str,
    pools: &[String],
) -> Option<(&'static str, String)> {
    if pools.is_empty() {
        return Some((
            "MissingDependency",
            "spec.addressPools is empty: list at least one AddressPool".into(),
        ));
    }
    for p in pools {
        let Some(pool) = snap.address_pool(p) else {
            return Some(("MissingDependency", format!("AddressPool {p:?} not found")));
        };
        if pool.spec.advertise_mode != type_ {
            return Some((
                "InvalidAddressPool",
                format!(
                    "AddressPool {p:?} has advertiseMode {:?}: it must be {type_:?} to match the ExternalNetwork",
                    pool.spec.advertise_mode
                ),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        AddressPool, ExternalNetwork, Subnet,
        addresspool::AddressPoolSpec,
        externalnetwork::ExternalNetworkSpec,
        subnet::{SubnetSpec, SubnetStatus},
    };

    fn net(name: &str, pools: &[&str]) -> ExternalNetwork {
        ExternalNetwork::new(
            name,
            ExternalNetworkSpec {
                type_: "arp".into(),
                address_pools: pools.iter().map(|p| p.to_string()).collect(),
            },
        )
    }

    #[test]
    fn eip_03_network_id_comes_from_the_shared_vni_pool_once() {
        let mut s = Snapshot::default();
        let mut web = Subnet::new(
            "web",
            SubnetSpec {
                vpc: "t".into(),
                cidr: "10.1.0.0/24".into(),
                network_acl: None,
            },
        );
        web.status = Some(SubnetStatus {
            vni: 2,
            ..Default::default()
        });
        s.subnets.push(web);
        s.address_pools.push(AddressPool::new(
            "lan",
            AddressPoolSpec {
                advertise_mode: "arp".into(),
                addresses: vec!["192.0.2.10-192.0.2.20".into()],
            },
        ));
        s.external_networks.push(net("ext", &["lan"]));
        s.external_networks.push(net("broken", &["nope"]));
        let st = reconcile_all(&s);
        // By age, then name: "broken" first; the Subnet's VNI 2 is held.
        assert_eq!(st["broken"].network_id, 3);
        assert_eq!(st["ext"].network_id, 4);
        assert!(st["ext"].conditions[0].status == "True");
        assert_eq!(st["broken"].conditions[0].reason, "MissingDependency");
        // Written once: a later pass keeps it even when lower VNIs are free again.
        s.subnets.clear();
        s.external_networks[0].status = Some(st["ext"].clone());
        assert_eq!(reconcile_all(&s)["ext"].network_id, 4);
        // A pool of the other mode.
        s.address_pools[0].spec.advertise_mode = "bgp".into();
        assert_eq!(
            reconcile_all(&s)["ext"].conditions[0].reason,
            "InvalidAddressPool"
        );
    }

    #[test]
    fn eip_12_a_bgp_network_says_whether_its_pools_are_announced() {
        let mut s = Snapshot::default();
        let mut n = net("ext", &["wan"]);
        n.spec.type_ = "bgp".into();
        s.external_networks.push(n);
        let st = reconcile_all(&s);
        let c = st["ext"]
            .conditions
            .iter()
            .find(|c| c.type_ == "Announced")
            .expect("a bgp network has Announced");
        assert_eq!(c.status, "False");
        if !BGP_SPEAKER_ON_NODES {
            assert_eq!(c.reason, "NoSpeaker");
        } else {
            assert_eq!(c.reason, "NoBGPAdvertisement");
            assert!(c.message.contains("wan"), "{}", c.message);
        }
        // An arp network has no such condition.
        s.external_networks[0].spec.type_ = "arp".into();
        let st = reconcile_all(&s);
        assert!(st["ext"].conditions.iter().all(|c| c.type_ != "Announced"));
    }
}
