//! The one admission dispatcher: which rule judges which request. The HTTPS webhook
//! (`webhook::review`) and the embedded store (`Store::create`, `create_pod`) both
//! come here, so a kind gets its rules in one place and a standalone run refuses
//! exactly what a cluster would.
use super::validate::{self, Snapshot, Verdict, reject};
use crate::api::{Object, PodRecord};

/// What is asked of admission.
pub enum Request<'a> {
    Create(&'a Object),
    Update {
        old: &'a Object,
        new: &'a Object,
    },
    /// Deletions are judged by name: what still refers to the object.
    Delete {
        kind: &'a str,
        name: &'a str,
    },
    /// A Pod's Juneau annotations (its NICs, addresses, ElasticIPs).
    CreatePod(&'a PodRecord),
}

/// The verdict for one request (pure). Kinds without rules of their own pass.
pub fn admit(request: Request<'_>, snap: &Snapshot) -> Verdict {
    use Object as O;
    match request {
        Request::Create(object) => match object {
            O::L2Network(n) => validate::validate_l2network_create(n, snap),
            O::Subnet(s) => validate::validate_subnet_create(s, snap),
            O::RouteTable(t) => validate::validate_route_table_create(t, snap),
            O::ExternalNetwork(e) => validate::validate_external_network_create(e, snap),
            O::AddressPool(p) => validate::validate_address_pool_create(p, snap),
            O::NetworkACL(a) => validate::validate_network_acl_create(a, snap),
            O::SecurityGroup(g) => validate::validate_security_group_create(g, snap),
            O::NATGateway(g) => validate::validate_nat_gateway_create(g, snap),
            O::ElasticIPAttachment(a) => validate::validate_elastic_ip_attachment_create(a, snap),
            O::BGPPeer(p) => validate::validate_bgp_peer_create(p, snap)
                .and_then(|()| validate::speaker_not_built("BGPPeer")),
            O::BGPAdvertisement(a) => validate::validate_bgp_advertisement_create(a, snap)
                .and_then(|()| validate::speaker_not_built("BGPAdvertisement")),
            _ => Ok(()),
        },
        Request::Update { old, new } => match (old, new) {
            (O::L2Network(o), O::L2Network(n)) => validate::validate_l2network_update(o, n, snap),
            (O::Subnet(o), O::Subnet(n)) => validate::validate_subnet_update(o, n, snap),
            (O::RouteTable(o), O::RouteTable(n)) => {
                validate::validate_route_table_update(o, n, snap)
            }
            (O::ElasticIP(o), O::ElasticIP(n)) => validate::validate_elastic_ip_update(o, n),
            (O::ElasticIPAttachment(o), O::ElasticIPAttachment(n)) => {
                validate::validate_elastic_ip_attachment_update(o, n)
            }
            (O::BGPPeer(o), O::BGPPeer(n)) if o.spec != n.spec => {
                validate::validate_bgp_peer_update(o, n, snap)
            }
            (O::BGPAdvertisement(o), O::BGPAdvertisement(n)) if o.spec != n.spec => {
                validate::validate_bgp_advertisement_update(o, n, snap)
            }
            (O::NATGateway(o), O::NATGateway(n)) if o.spec != n.spec => {
                validate::validate_nat_gateway_update(o, n, snap)
            }
            // As for the pools below: a metadata-only update passes, so that an object
            // stored before these rules can still be labelled and deleted.
            (O::NetworkACL(o), O::NetworkACL(n)) if o.spec != n.spec => {
                validate::validate_network_acl_update(o, n, snap)
            }
            (O::SecurityGroup(o), O::SecurityGroup(n)) if o.spec != n.spec => {
                validate::validate_security_group_update(o, n, snap)
            }
            // An update that changes the spec is held to the creation rules (each rule
            // leaves the object itself out of the others it compares with): a pool
            // edited to a backward range would otherwise be dropped by the allocator
            // without a word. A metadata-only update (labels, finalizers) passes, so
            // that objects that already clash can still be labelled and deleted.
            (O::ExternalNetwork(o), O::ExternalNetwork(n)) if o.spec != n.spec => {
                validate::validate_external_network_create(n, snap)
            }
            (O::AddressPool(o), O::AddressPool(n)) if o.spec != n.spec => {
                validate::validate_address_pool_create(n, snap)
            }
            (o, n) if std::mem::discriminant(o) != std::mem::discriminant(n) => Err(reject(
                "kind",
                "an update cannot change an object's kind; delete it and create the new one",
            )),
            _ => Ok(()),
        },
        Request::Delete { kind, name } => match kind {
            "Vpc" => validate::validate_delete_vpc(name, snap),
            "RouteTable" => validate::validate_delete_route_table(name, snap),
            "Subnet" => validate::validate_delete_subnet(name, snap),
            "NetworkACL" => validate::validate_delete_network_acl(name, snap),
            "SecurityGroup" => validate::validate_delete_security_group(name, snap),
            "NATGateway" => validate::validate_delete_nat_gateway(name, snap),
            "ExternalNetwork" => validate::validate_delete_external_network(name, snap),
            "AddressPool" => validate::validate_delete_address_pool(name, snap),
            _ => Ok(()),
        },
        Request::CreatePod(pod) => validate::validate_pod_create(&pod.annotations, snap)
            .and_then(|()| validate::validate_pod_elastic_ips(pod, snap)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        L2Network, Subnet, Vpc, l2network::L2NetworkSpec, subnet::SubnetSpec, vpc::VpcSpec,
    };

    fn snap() -> Snapshot {
        let mut s = Snapshot::default();
        s.vpcs.push(Vpc::new("tenant-a", VpcSpec::default()));
        s.subnets.push(Subnet::new(
            "web",
            SubnetSpec {
                vpc: "tenant-a".into(),
                cidr: "10.1.0.0/24".into(),
                network_acl: None,
            },
        ));
        s
    }

    fn l2(cidr: &str) -> Object {
        Object::L2Network(L2Network::new(
            "lab",
            L2NetworkSpec {
                vpc: "tenant-a".into(),
                cidr: Some(cidr.into()),
                ..Default::default()
            },
        ))
    }

    /// L2-07, L2-08: the dispatcher hands each request to its kind's rule: a creation
    /// overlapping a Subnet of its Vpc and an unnormalized CIDR are refused by the
    /// L2Network rules, a clean one passes, and so does a kind without rules.
    #[test]
    fn l2_07_l2_08_admit_hands_each_kind_to_its_rule() {
        let s = snap();
        let e = admit(Request::Create(&l2("10.1.0.0/25")), &s).unwrap_err();
        assert!(e.to_string().contains("10.1.0.0/24"), "{e}");
        let e = admit(Request::Create(&l2("10.2.0.5/24")), &s).unwrap_err();
        assert!(e.to_string().contains("10.2.0.0/24"), "{e}");
        assert!(admit(Request::Create(&l2("10.2.0.0/24")), &s).is_ok());
        let sg = Object::from_value(serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup",
            "metadata": {"name": "sg"}, "spec": {"vpc": "tenant-a"}
        }))
        .unwrap();
        assert!(admit(Request::Create(&sg), &s).is_ok());
    }

    /// L2-04, L2-07: an update is judged by its kind's update rule (the CIDR is
    /// immutable), and no update may change an object's kind.
    #[test]
    fn l2_04_l2_07_admit_judges_updates_and_refuses_a_change_of_kind() {
        let s = snap();
        let (old, new) = (l2("10.2.0.0/24"), l2("10.3.0.0/24"));
        let e = admit(
            Request::Update {
                old: &old,
                new: &new,
            },
            &s,
        )
        .unwrap_err();
        assert!(e.to_string().contains("cidr"), "{e}");
        assert!(
            admit(
                Request::Update {
                    old: &old,
                    new: &old
                },
                &s
            )
            .is_ok()
        );
        let vpc = Object::Vpc(Vpc::new("lab", VpcSpec::default()));
        let e = admit(
            Request::Update {
                old: &old,
                new: &vpc,
            },
            &s,
        )
        .unwrap_err();
        assert_eq!(e.field, "kind");
    }

    fn policy(kind: &str, name: &str, spec: serde_json::Value) -> Object {
        Object::from_value(serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": kind,
            "metadata": {"name": name}, "spec": spec
        }))
        .unwrap()
    }

    /// POL-01, POL-02, POL-03: NetworkACLs and SecurityGroups go to their rules on
    /// creation, on a spec update (a metadata-only one passes) and on deletion.
    #[test]
    fn pol_01_pol_02_pol_03_admit_hands_policies_to_their_rules() {
        let mut s = snap();
        let bad_acl = policy(
            "NetworkACL",
            "acl",
            serde_json::json!({"vpc": "tenant-a", "ingress": [{"priority": 1, "action": "drop"}]}),
        );
        let e = admit(Request::Create(&bad_acl), &s).unwrap_err();
        assert!(e.to_string().contains("neither allow nor deny"), "{e}");
        let acl = policy("NetworkACL", "acl", serde_json::json!({"vpc": "tenant-a"}));
        assert!(admit(Request::Create(&acl), &s).is_ok());
        let e = admit(
            Request::Update {
                old: &acl,
                new: &bad_acl,
            },
            &s,
        )
        .unwrap_err();
        assert!(e.to_string().contains("neither allow nor deny"), "{e}");
        let ghost = serde_json::json!({"vpc": "tenant-a",
            "ingress": [{"from": [{"securityGroupRef": {"name": "ghost"}}]}]});
        let e = admit(
            Request::Create(&policy("SecurityGroup", "sg", ghost.clone())),
            &s,
        )
        .unwrap_err();
        assert!(e.to_string().contains("names no SecurityGroup"), "{e}");
        // Stored before the rules (or its peer deleted since): a label still goes on.
        let stored = policy("SecurityGroup", "sg", ghost);
        assert!(
            admit(
                Request::Update {
                    old: &stored,
                    new: &stored
                },
                &s
            )
            .is_ok()
        );
        let Object::SecurityGroup(g) = policy(
            "SecurityGroup",
            "sg",
            serde_json::json!({"vpc": "tenant-a"}),
        ) else {
            unreachable!()
        };
        s.security_groups.push(g);
        let mut user = team_nic();
        user.spec.security_groups = vec!["sg".into()];
        s.interfaces.push(user);
        let e = admit(
            Request::Delete {
                kind: "SecurityGroup",
                name: "sg",
            },
            &s,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("is used by NetworkInterfaces"),
            "{e}"
        );
    }

    fn team_nic() -> crate::api::NetworkInterface {
        let mut n = crate::api::NetworkInterface::new("p.eth0", Default::default());
        n.metadata.namespace = Some("team".into());
        n
    }

    /// A deletion is judged by what still refers to the object: the Vpc of a Subnet
    /// stays; a kind without a deletion rule goes.
    #[test]
    fn l2_04_admit_refuses_deleting_a_vpc_still_in_use() {
        let s = snap();
        let vpc = Request::Delete {
            kind: "Vpc",
            name: "tenant-a",
        };
        assert!(admit(vpc, &s).is_err());
        let other = Request::Delete {
            kind: "SecurityGroup",
            name: "sg",
        };
        assert!(admit(other, &s).is_ok());
    }
}
