//! Subnet status: a VNI from the `subnet-vni` pool shared with L2Networks (L2-22), the
//! gateway at the CIDR's first address, a gateway MAC chosen once, and its
//! NetworkACL's id and version (`networkACL`, as an L2Network's: POL-01).
use std::collections::BTreeMap;

use crate::controller::segments::{gateway_mac, held_vnis, next_vni, oldest_first, vni_exhausted};
use crate::{
    admission::validate::Snapshot,
    api::net::first_host,
    api::{condition::Condition, l2network::AclRef, subnet::SubnetStatus},
};

/// Every Subnet's status; `acls` as for L2Networks (`l2network::reconcile_with`).
pub fn reconcile_with(
    snap: &Snapshot,
    acls: &BTreeMap<String, AclRef>,
) -> BTreeMap<String, SubnetStatus> {
    let mut held = held_vnis(snap);
    let mut out = BTreeMap::new();
    for s in oldest_first(&snap.subnets) {
        let name = s.metadata.name.clone().unwrap_or_default();
        let old = s.status.clone().unwrap_or_default();
        let Some(cidr) = s.prefix() else {
            let mut st = old;
            st.conditions = vec![Condition::new(
                "Ready",
                false,
                "InvalidCIDR",
                format!("spec.cidr {:?} is not an IPv4 CIDR", s.spec.cidr),
            )];
            out.insert(name, st);
            continue;
        };
        let vni = if old.vni != 0 {
            old.vni
        } else {
            let Some(v) = next_vni(&mut held) else {
                let mut st = old;
                st.conditions = vec![vni_exhausted()];
                out.insert(name, st);
                continue;
            };
            v
        };
        let gateway_mac = old.gateway_mac.unwrap_or_else(|| gateway_mac(vni));
        out.insert(
            name,
            SubnetStatus {
                vni,
                gateway: Some(first_host(&cidr)),
                gateway_mac: Some(gateway_mac),
                conditions: vec![Condition::new("Ready", true, "Reconciled", "")],
                network_acl: s
                    .spec
                    .network_acl
                    .as_ref()
                    .and_then(|a| acls.get(a))
                    .cloned(),
                // Kept; the Service source pass (`service_source`) moves them.
                node_addresses: old.node_addresses,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        api::{
            L2Network, Subnet,
            l2network::{L2NetworkSpec, L2NetworkStatus},
            subnet::SubnetSpec,
        },
        controller::Config,
        features::l2::controller as l2network,
    };

    /// A pass's Subnet statuses, the NetworkACLs' ids read from `snap` alone.
    fn reconcile_all(snap: &Snapshot) -> BTreeMap<String, SubnetStatus> {
        reconcile_with(snap, &crate::controller::acl_refs(snap))
    }

    fn subnet(name: &str, cidr: &str) -> Subnet {
        Subnet::new(
            name,
            SubnetSpec {
                vpc: "t".into(),
                cidr: cidr.into(),
                network_acl: None,
            },
        )
    }

    #[test]
    fn l2_22_subnets_and_l2networks_never_share_a_vni() {
        let mut snap = Snapshot::default();
        let mut l = L2Network::new(
            "lab",
            L2NetworkSpec {
                vpc: "t".into(),
                ..Default::default()
            },
        );
        l.status = Some(L2NetworkStatus {
            vni: 2,
            ..Default::default()
        });
        snap.l2networks.push(l);
        snap.subnets.push(subnet("web", "10.71.0.0/24"));
        snap.subnets.push(subnet("db", "10.72.0.0/24"));
        let st = reconcile_all(&snap);
        assert_eq!(st["db"].vni, 3, "2 is held by the L2Network");
        assert_eq!(st["web"].vni, 4);
        assert_eq!(st["web"].gateway, "10.71.0.1".parse().ok());
        assert_eq!(st["web"].gateway_mac, Some(gateway_mac(4)));
        // An L2Network created next sees the Subnets' VNIs as held.
        for s in &mut snap.subnets {
            s.status = st.get(s.metadata.name.as_deref().unwrap()).cloned();
        }
        snap.l2networks.push(L2Network::new(
            "later",
            L2NetworkSpec {
                vpc: "t".into(),
                ..Default::default()
            },
        ));
        let l2 = l2network::reconcile_with(
            &snap,
            &Config::default(),
            &crate::controller::acl_refs(&snap),
        );
        assert_eq!(l2["later"].vni, 5);
        // Kept once chosen.
        assert_eq!(reconcile_all(&snap), st);
    }

    #[test]
    fn l2_15_a_subnet_with_a_bad_cidr_gets_no_vni_and_says_which_field() {
        let mut snap = Snapshot::default();
        snap.subnets.push(subnet("bad", "10.71.0.0"));
        let st = reconcile_all(&snap);
        assert_eq!(st["bad"].vni, 0, "nothing allocated for it");
        assert!(st["bad"].conditions[0].message.contains("spec.cidr"));
    }
}
