//! The rules that read other objects: security groups on a segment without a gateway
//! (L2-19), and deletions the referenced side refuses (L2-32).
use super::*;

#[test]
fn l2_19_security_groups_on_a_gateway_less_segment_are_refused() {
    let mut s = snap();
    s.l2networks.push(l2("pure", "tenant-a", None));
    s.l2networks.push(with_gw(
        l2("routed", "tenant-a", Some("10.8.0.0/24")),
        None,
        None,
    ));
    s.security_groups.push(crate::api::SecurityGroup::new(
        "sg",
        crate::api::securitygroup::SecurityGroupSpec {
            vpc: "tenant-a".into(),
            ..Default::default()
        },
    ));
    assert_eq!(
        msg(validate_pod_create(
            &pod(&[(
                "networks",
                r#"[{"interface":"eth1","l2Network":"pure","securityGroups":["sg"]}]"#
            )]),
            &s
        )),
        "metadata.annotations: eth1: L2Network \"pure\" has no gateway, and SecurityGroups act only on traffic crossing it; remove securityGroups from this entry"
    );
    assert!(
        validate_pod_create(
            &pod(&[(
                "networks",
                r#"[{"interface":"eth1","l2Network":"routed","securityGroups":["sg"]}]"#
            )]),
            &s
        )
        .is_ok()
    );
}

#[test]
fn l2_32_referenced_side_refuses_deletion() {
    let mut s = snap();
    s.l2networks.push(with_gw(
        l2("routed", "tenant-b", Some("10.8.0.0/24")),
        None,
        None,
    ));
    let mut acl_user = with_gw(
        l2("guarded", "tenant-a", Some("10.6.0.0/24")),
        None,
        Some("tenant-a"),
    );
    acl_user.spec.network_acl = Some("acl-a".into());
    s.l2networks.push(acl_user);
    assert_eq!(
        msg(validate_delete_vpc("tenant-a", &s)),
        "metadata.name: Vpc \"tenant-a\" still has L2Networks \"lab\", \"guarded\" and Subnets \"web\" and NetworkACLs \"acl-a\"; delete them first"
    );
    assert!(validate_delete_vpc("tenant-e", &s).is_ok());
    assert_eq!(
        msg(validate_delete_route_table("tenant-b", &s)),
        "metadata.name: RouteTable \"tenant-b\" is used by the gateway of L2Networks \"routed\" and Subnets \"b-web\"; change or remove their gateways first"
    );
    assert!(msg(validate_delete_route_table("tenant-a", &s)).contains("\"guarded\""));
    assert_eq!(
        msg(validate_delete_network_acl("acl-a", &s)),
        "metadata.name: NetworkACL \"acl-a\" is referenced by L2Networks \"guarded\"; remove spec.networkACL there first"
    );
    assert!(validate_delete_network_acl("acl-b", &s).is_ok());
}

#[test]
fn l2_32_subnets_guard_their_vpc_table_acl_and_themselves() {
    let mut s = snap();
    s.subnets[0].spec.network_acl = Some("acl-w".into());
    assert_eq!(
        msg(validate_delete_network_acl("acl-w", &s)),
        "metadata.name: NetworkACL \"acl-w\" is referenced by Subnets \"web\"; remove spec.networkACL there first"
    );
    s.route_tables.push(RouteTable::new(
        "tenant-e",
        RouteTableSpec {
            vpc: "tenant-e".into(),
            ..Default::default()
        },
    ));
    assert!(validate_delete_route_table("tenant-e", &s).is_ok());
    s.subnets.push(Subnet::new(
        "e-web",
        SubnetSpec {
            vpc: "tenant-e".into(),
            cidr: "10.4.0.0/24".into(),
            network_acl: None,
        },
    ));
    assert_eq!(
        msg(validate_delete_route_table("tenant-e", &s)),
        "metadata.name: RouteTable \"tenant-e\" is used by the gateway of Subnets \"e-web\"; change or remove their gateways first"
    );
    assert!(validate_delete_subnet("e-web", &s).is_ok());
    let mut nic = NetworkInterface::new(
        "app.eth0",
        NetworkInterfaceSpec {
            subnet: Some("e-web".into()),
            interface: "eth0".into(),
            ..Default::default()
        },
    );
    nic.metadata.namespace = Some("shop".into());
    s.interfaces.push(nic);
    assert_eq!(
        msg(validate_delete_subnet("e-web", &s)),
        "metadata.name: Subnet \"e-web\" still has NetworkInterfaces \"shop/app.eth0\"; delete their Pods first"
    );
}
