//! Every rejection is tested with its message.
use std::collections::BTreeMap;

use super::*;
use crate::api::{
    L2Network, NetworkACL, NetworkInterface, RouteTable, Subnet, TransitGateway, Vpc, VpcPeering,
    l2network::{L2Gateway, L2NetworkSpec},
    networkacl::NetworkACLSpec,
    networkinterface::{NetworkInterfaceSpec, NetworkInterfaceStatus, PodRef},
    routetable::RouteTableSpec,
    subnet::SubnetSpec,
    vpc::{EndpointPool, TransitGatewaySpec, VpcPeeringSpec, VpcSpec},
};

fn l2(name: &str, vpc: &str, cidr: Option<&str>) -> L2Network {
    L2Network::new(
        name,
        L2NetworkSpec {
            vpc: vpc.into(),
            cidr: cidr.map(Into::into),
            ..Default::default()
        },
    )
}

fn with_gw(mut l: L2Network, address: Option<&str>, rt: Option<&str>) -> L2Network {
    l.spec.gateway = Some(L2Gateway {
        address: address.map(Into::into),
        route_table: rt.map(Into::into),
    });
    l
}

fn snap() -> Snapshot {
    let mut s = Snapshot::default();
    s.vpcs.push(Vpc::new("default", VpcSpec::default()));
    s.vpcs.push(Vpc::new(
        "tenant-a",
        VpcSpec {
            endpoint_pool: Some(EndpointPool {
                cidrs: vec!["10.250.0.0/24".into()],
            }),
            ..Default::default()
        },
    ));
    s.vpcs.push(Vpc::new("tenant-b", VpcSpec::default()));
    s.vpcs.push(Vpc::new("tenant-c", VpcSpec::default()));
    s.vpcs.push(Vpc::new("tenant-d", VpcSpec::default()));
    s.subnets.push(Subnet::new(
        "web",
        SubnetSpec {
            vpc: "tenant-a".into(),
            cidr: "10.1.0.0/24".into(),
            network_acl: None,
        },
    ));
    s.subnets.push(Subnet::new(
        "b-web",
        SubnetSpec {
            vpc: "tenant-b".into(),
            cidr: "10.2.0.0/24".into(),
            network_acl: None,
        },
    ));
    s.subnets.push(Subnet::new(
        "c-web",
        SubnetSpec {
            vpc: "tenant-c".into(),
            cidr: "10.3.0.0/24".into(),
            network_acl: None,
        },
    ));
    s.subnets.push(Subnet::new(
        "d-web",
        SubnetSpec {
            vpc: "tenant-d".into(),
            cidr: "10.4.0.0/24".into(),
            network_acl: None,
        },
    ));
    s.peerings.push(VpcPeering::new(
        "a-b",
        VpcPeeringSpec {
            vpcs: vec!["tenant-a".into(), "tenant-b".into()],
        },
    ));
    s.transit_gateways.push(TransitGateway::new(
        "tgw",
        TransitGatewaySpec {
            vpcs: vec!["tenant-a".into(), "tenant-c".into()],
        },
    ));
    s.l2networks
        .push(l2("lab", "tenant-a", Some("10.9.0.0/24")));
    s.route_tables.push(RouteTable::new(
        "tenant-a",
        RouteTableSpec {
            vpc: "tenant-a".into(),
            routes: vec![],
        },
    ));
    s.route_tables.push(RouteTable::new(
        "tenant-b",
        RouteTableSpec {
            vpc: "tenant-b".into(),
            routes: vec![],
        },
    ));
    s.network_acls.push(NetworkACL::new(
        "acl-a",
        NetworkACLSpec {
            vpc: "tenant-a".into(),
            ..Default::default()
        },
    ));
    s.network_acls.push(NetworkACL::new(
        "acl-b",
        NetworkACLSpec {
            vpc: "tenant-b".into(),
            ..Default::default()
        },
    ));
    s.service_cidrs.push("10.96.0.0/12".parse().unwrap());
    s
}

fn msg(v: Verdict) -> String {
    v.expect_err("expected a rejection").to_string()
}

#[test]
fn l2_04_vpc_is_required_exists_and_is_immutable() {
    let s = snap();
    assert_eq!(
        msg(validate_l2network_create(&l2("x", "", None), &s)),
        "spec.vpc: required: every L2Network belongs to exactly one Vpc"
    );
    assert_eq!(
        msg(validate_l2network_create(&l2("x", "nope", None), &s)),
        "spec.vpc: Vpc \"nope\" does not exist; create it first"
    );
    let old = l2("x", "tenant-a", None);
    let new = l2("x", "tenant-b", None);
    assert_eq!(
        msg(validate_l2network_update(&old, &new, &s)),
        "spec.vpc: is immutable; create a new L2Network in the other Vpc instead"
    );
    assert!(validate_l2network_create(&l2("x", "tenant-a", None), &s).is_ok());
}

#[test]
fn l2_05_the_default_vpc_cannot_be_named() {
    assert_eq!(
        msg(validate_l2network_create(
            &l2("x", "default", None),
            &snap()
        )),
        "spec.vpc: the default Vpc holds only the default Subnet; create a Vpc of your own for this L2Network"
    );
}

#[test]
fn l2_07_cidr_is_ipv4_normalized_16_to_28_and_immutable() {
    let s = snap();
    assert_eq!(
        msg(validate_l2network_create(
            &l2("x", "tenant-d", Some("10.0.1.5/24")),
            &s
        )),
        "spec.cidr: 10.0.1.5/24 has host bits set; use 10.0.1.0/24"
    );
    assert_eq!(
        msg(validate_l2network_create(
            &l2("x", "tenant-d", Some("fd00::/64")),
            &s
        )),
        "spec.cidr: fd00::/64 is IPv6; L2Networks take IPv4 only"
    );
    assert_eq!(
        msg(validate_l2network_create(
            &l2("x", "tenant-d", Some("10.0.0.0/15")),
            &s
        )),
        "spec.cidr: /15 is outside /16 to /28"
    );
    assert_eq!(
        msg(validate_l2network_create(
            &l2("x", "tenant-d", Some("10.0.0.0/29")),
            &s
        )),
        "spec.cidr: /29 is outside /16 to /28"
    );
    assert!(validate_l2network_create(&l2("x", "tenant-d", Some("10.0.0.0/28")), &s).is_ok());
    let old = l2("x", "tenant-d", Some("10.0.0.0/24"));
    let new = l2("x", "tenant-d", Some("10.0.1.0/24"));
    assert!(msg(validate_l2network_update(&old, &new, &s)).starts_with("spec.cidr: is immutable"));
}

#[test]
fn l2_08_all_five_overlap_checks() {
    let s = snap();
    let check =
        |vpc: &str, cidr: &str| msg(validate_l2network_create(&l2("new", vpc, Some(cidr)), &s));
    assert_eq!(
        check("tenant-a", "10.1.0.0/16"),
        "spec.cidr: 10.1.0.0/16 overlaps Subnet \"web\" (10.1.0.0/24) in the same Vpc \"tenant-a\""
    );
    assert_eq!(
        check("tenant-a", "10.9.0.0/25"),
        "spec.cidr: 10.9.0.0/25 overlaps L2Network \"lab\" (10.9.0.0/24) in the same Vpc \"tenant-a\""
    );
    assert_eq!(
        check("tenant-a", "10.2.0.0/24"),
        "spec.cidr: 10.2.0.0/24 overlaps Subnet \"b-web\" (10.2.0.0/24) in Vpc \"tenant-b\", reachable from \"tenant-a\" by VpcPeering or TransitGateway"
    );
    assert!(
        check("tenant-a", "10.3.0.0/24")
            .contains("Subnet \"c-web\" (10.3.0.0/24) in Vpc \"tenant-c\""),
        "TransitGateway"
    );
    assert_eq!(
        check("tenant-a", "10.250.0.0/20"),
        "spec.cidr: 10.250.0.0/20 overlaps the endpointPool 10.250.0.0/24 of Vpc \"tenant-a\""
    );
    assert_eq!(
        check("tenant-d", "10.100.0.0/16"),
        "spec.cidr: 10.100.0.0/16 overlaps the cluster's Service CIDR 10.96.0.0/12"
    );
    // Without a gateway too, and nothing clashes across unconnected Vpcs.
    assert!(validate_l2network_create(&l2("new", "tenant-d", Some("10.2.0.0/24")), &s).is_ok());
}

#[test]
fn l2_10_gateway_requires_cidr() {
    let l = with_gw(l2("x", "tenant-d", None), None, None);
    assert_eq!(
        msg(validate_l2network_create(&l, &snap())),
        "spec.gateway: requires spec.cidr: a gateway routes the segment's addresses; add spec.cidr or remove spec.gateway"
    );
}

#[test]
fn l2_11_gateway_address_inside_cidr_and_not_network_or_broadcast() {
    let s = snap();
    let gw = |a: &str| {
        msg(validate_l2network_create(
            &with_gw(l2("x", "tenant-d", Some("10.7.0.0/24")), Some(a), None),
            &s,
        ))
    };
    assert_eq!(
        gw("10.8.0.1"),
        "spec.gateway.address: 10.8.0.1 is outside spec.cidr 10.7.0.0/24"
    );
    assert_eq!(
        gw("10.7.0.0"),
        "spec.gateway.address: 10.7.0.0 is the network or broadcast address of 10.7.0.0/24; pick a host address"
    );
    assert!(gw("10.7.0.255").contains("network or broadcast"));
    assert!(
        validate_l2network_create(
            &with_gw(
                l2("x", "tenant-d", Some("10.7.0.0/24")),
                Some("10.7.0.254"),
                None
            ),
            &s
        )
        .is_ok()
    );
}

#[test]
fn l2_12_gateway_route_table_of_the_same_vpc() {
    let s = snap();
    let l = with_gw(
        l2("x", "tenant-a", Some("10.7.0.0/24")),
        None,
        Some("tenant-b"),
    );
    assert_eq!(
        msg(validate_l2network_create(&l, &s)),
        "spec.gateway.routeTable: RouteTable \"tenant-b\" belongs to Vpc \"tenant-b\", not \"tenant-a\""
    );
    let l = with_gw(l2("x", "tenant-a", Some("10.7.0.0/24")), None, Some("gone"));
    assert_eq!(
        msg(validate_l2network_create(&l, &s)),
        "spec.gateway.routeTable: RouteTable \"gone\" does not exist"
    );
}

#[test]
fn l2_16_gateway_on_a_held_address_is_refused() {
    let mut s = snap();
    let mut nic = NetworkInterface::new(
        "app.eth1",
        NetworkInterfaceSpec {
            interface: "eth1".into(),
            l2_network: Some("x".into()),
            pod_ref: PodRef { name: "app".into() },
            ..Default::default()
        },
    );
    nic.metadata.namespace = Some("team".into());
    nic.status = Some(NetworkInterfaceStatus {
        address: "10.7.0.1/24".parse().ok(),
        ..Default::default()
    });
    s.interfaces.push(nic);
    let old = l2("x", "tenant-d", Some("10.7.0.0/24"));
    let new = with_gw(old.clone(), None, None);
    assert_eq!(
        msg(validate_l2network_update(&old, &new, &s)),
        "spec.gateway.address: address 10.7.0.1 is already held by NetworkInterface team/app.eth1; choose another gateway address (the exclusion only stops new hand-outs, it reclaims nothing)"
    );
    let elsewhere = with_gw(old.clone(), Some("10.7.0.9"), None);
    assert!(validate_l2network_update(&old, &elsewhere, &s).is_ok());
}

#[test]
fn l2_20_network_acl_needs_a_gateway_and_the_same_vpc() {
    let s = snap();
    let mut l = l2("x", "tenant-a", Some("10.7.0.0/24"));
    l.spec.network_acl = Some("acl-a".into());
    assert_eq!(
        msg(validate_l2network_create(&l, &s)),
        "spec.networkACL: a NetworkACL acts only at the gateway; set spec.gateway (and spec.cidr) or remove spec.networkACL"
    );
    let mut l = with_gw(l2("x", "tenant-a", Some("10.7.0.0/24")), None, None);
    l.spec.network_acl = Some("acl-b".into());
    assert_eq!(
        msg(validate_l2network_create(&l, &s)),
        "spec.networkACL: NetworkACL \"acl-b\" belongs to Vpc \"tenant-b\", not \"tenant-a\""
    );
    l.spec.network_acl = Some("acl-a".into());
    assert!(validate_l2network_create(&l, &s).is_ok());
}

#[test]
fn l2_21_mtu_between_576_and_9000() {
    let s = snap();
    for (mtu, ok) in [(575, false), (576, true), (9000, true), (9001, false)] {
        let mut l = l2("x", "tenant-d", None);
        l.spec.mtu = Some(mtu);
        assert_eq!(validate_l2network_create(&l, &s).is_ok(), ok, "mtu {mtu}");
    }
    let mut l = l2("x", "tenant-d", None);
    l.spec.mtu = Some(100);
    assert_eq!(
        msg(validate_l2network_create(&l, &s)),
        "spec.mtu: 100 is outside 576-9000"
    );
}

fn pod(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("juneau.loutres.me/{k}"), v.to_string()))
        .collect()
}

#[test]
fn l2_24_l2_26_eth0_on_an_l2network_needs_cidr_and_gateway_and_a_networks_entry() {
    let mut s = snap();
    s.l2networks.push(with_gw(
        l2("routed", "tenant-a", Some("10.8.0.0/24")),
        None,
        None,
    ));
    s.l2networks.push(l2("pure", "tenant-a", None));
    assert!(
        validate_pod_create(
            &pod(&[("networks", r#"[{"interface":"eth0","l2Network":"routed"}]"#)]),
            &s
        )
        .is_ok()
    );
    assert_eq!(
        msg(validate_pod_create(
            &pod(&[("networks", r#"[{"interface":"eth0","l2Network":"pure"}]"#)]),
            &s
        )),
        "metadata.annotations: eth0 can join L2Network \"pure\" only if it has both spec.cidr and spec.gateway (a Pod's first NIC needs an address and a default route); attach it as eth1 instead"
    );
    assert_eq!(
        msg(validate_pod_create(&pod(&[("subnet", "routed")]), &s)),
        "metadata.annotations: eth0: annotation subnet takes Subnet names only; \"routed\" is an L2Network: use networks: [{\"interface\": \"eth0\", \"l2Network\": \"routed\"}]"
    );
    assert!(
        msg(validate_pod_create(
            &pod(&[("networks", r#"[{"interface":"eth1","l2Network":"nope"}]"#)]),
            &s
        ))
        .contains("L2Network \"nope\" does not exist")
    );
    assert!(
        validate_pod_create(
            &pod(&[("networks", r#"[{"interface":"eth1","l2Network":"pure"}]"#)]),
            &s
        )
        .is_ok()
    );
}

mod references;
