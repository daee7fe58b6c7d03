//! L2Network status (L2-21, L2-22, L2-23): VNI from the shared `subnet-vni` pool, never
//! reused while held; effective MTU; resolved gateway; a gateway MAC chosen once.
use std::collections::BTreeMap;

use crate::controller::{
    config::Config,
    segments::{gateway_mac, held_vnis, next_vni, oldest_first, vni_exhausted},
};
use crate::{
    admission::validate::Snapshot,
    api::{
        condition::Condition,
        l2network::{AclRef, L2NetworkStatus},
    },
};

/// Every L2Network's status; `acls` is what each NetworkACL's `status.networkACL`
/// reads in this pass (`policy::acl_refs`), so a new ACL's id shows in one pass.
pub fn reconcile_with(
    snap: &Snapshot,
    cfg: &Config,
    acls: &BTreeMap<String, AclRef>,
) -> BTreeMap<String, L2NetworkStatus> {
    let mut held = held_vnis(snap);
    let mut out = BTreeMap::new();
    for l in oldest_first(&snap.l2networks) {
        let name = l.metadata.name.clone().unwrap_or_default();
        let old = l.status.clone().unwrap_or_default();
        let vni = if old.vni != 0 {
            old.vni
        } else {
            let Some(v) = next_vni(&mut held) else {
                let mut st = old.clone();
                st.conditions = vec![vni_exhausted()];
                out.insert(name, st);
                continue;
            };
            v
        };
        // Admission refuses a gateway address that is no IPv4 address.
        let gateway = l.gateway_address();
        let gateway_mac = gateway.map(|_| old.gateway_mac.unwrap_or_else(|| gateway_mac(vni)));
        let network_acl = l
            .spec
            .network_acl
            .as_ref()
            .and_then(|a| acls.get(a))
            .cloned();
        out.insert(
            name,
            L2NetworkStatus {
                vni,
                mtu: l.spec.mtu.unwrap_or(cfg.default_l2_mtu),
                gateway,
                gateway_mac,
                network_acl,
                conditions: vec![Condition::new("Ready", true, "Reconciled", "")],
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::net::shown;
    use crate::api::{
        L2Network, Subnet,
        l2network::{L2Gateway, L2NetworkSpec},
        subnet::{SubnetSpec, SubnetStatus},
    };

    /// A pass's L2Network statuses, the NetworkACLs' ids read from `snap` alone.
    fn reconcile_all(snap: &Snapshot, cfg: &Config) -> BTreeMap<String, L2NetworkStatus> {
        reconcile_with(snap, cfg, &crate::controller::acl_refs(snap))
    }

    fn l2(name: &str, cidr: Option<&str>, gw: bool) -> L2Network {
        L2Network::new(
            name,
            L2NetworkSpec {
                vpc: "t".into(),
                cidr: cidr.map(Into::into),
                gateway: gw.then(L2Gateway::default),
                ..Default::default()
            },
        )
    }

    #[test]
    fn l2_22_vnis_come_from_the_shared_pool_and_are_never_reused_while_held() {
        let mut snap = Snapshot::default();
        let mut s = Subnet::new(
            "s",
            SubnetSpec {
                vpc: "t".into(),
                cidr: "10.0.0.0/24".into(),
                network_acl: None,
            },
        );
        s.status = Some(SubnetStatus {
            vni: 2,
            ..Default::default()
        });
        snap.subnets.push(s);
        snap.l2networks.push(l2("a", None, false));
        snap.l2networks.push(l2("b", None, false));
        let st = reconcile_all(&snap, &Config::default());
        assert_eq!(st["a"].vni, 3, "2 is held by the Subnet");
        assert_eq!(st["b"].vni, 4);
        // A held VNI stays, even when a lower one frees up.
        snap.subnets.clear();
        snap.l2networks[1].status = Some(st["b"].clone());
        let again = reconcile_all(&snap, &Config::default());
        assert_eq!(again["b"].vni, 4);
        assert_eq!(again["a"].vni, 2);
    }

    #[test]
    fn l2_23_status_mtu_gateway_and_stable_gateway_mac() {
        let mut snap = Snapshot::default();
        snap.l2networks
            .push(l2("routed", Some("10.7.0.0/24"), true));
        let mut pure = l2("pure", None, false);
        pure.spec.mtu = Some(9000);
        snap.l2networks.push(pure);
        let st = reconcile_all(
            &snap,
            &Config {
                default_l2_mtu: 1450,
                ..Default::default()
            },
        );
        assert_eq!(st["routed"].mtu, 1450, "controller default");
        assert_eq!(st["pure"].mtu, 9000);
        assert_eq!(
            shown(&st["routed"].gateway),
            "10.7.0.1",
            "first address by default (L2-11)"
        );
        assert_eq!(st["pure"].gateway, None);
        assert_eq!(st["pure"].gateway_mac, None);
        assert!(shown(&st["routed"].gateway_mac).starts_with("02:"));
        // Chosen once: an existing MAC is kept.
        let mut kept = st["routed"].clone();
        kept.gateway_mac = "02:aa:bb:cc:dd:ee".parse().ok();
        snap.l2networks[0].status = Some(kept);
        assert_eq!(
            shown(&reconcile_all(&snap, &Config::default())["routed"].gateway_mac),
            "02:aa:bb:cc:dd:ee"
        );
    }
}
