//! Every NetworkACL and SecurityGroup refusal, with its message.
use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::admission::validate::{
    validate_delete_security_group, validate_delete_vpc, validate_network_acl_create,
    validate_network_acl_update, validate_pod_create, validate_security_group_create,
    validate_security_group_update,
};
use crate::api::{
    L2Network, NetworkInterface, Subnet, Vpc,
    l2network::{L2Gateway, L2NetworkSpec},
    networkinterface::{NetworkInterfaceSpec, PodRef},
    subnet::SubnetSpec,
    vpc::VpcSpec,
};

fn snap() -> Snapshot {
    let mut s = Snapshot::default();
    s.vpcs.push(Vpc::new("a", VpcSpec::default()));
    s.vpcs.push(Vpc::new("b", VpcSpec::default()));
    s.subnets.push(Subnet::new(
        "web",
        SubnetSpec {
            vpc: "a".into(),
            cidr: "10.1.0.0/24".into(),
            network_acl: None,
        },
    ));
    s.security_groups.push(sg("web-sg", json!({"vpc": "a"})));
    s.security_groups.push(sg("b-sg", json!({"vpc": "b"})));
    s
}

fn acl(name: &str, spec: serde_json::Value) -> NetworkACL {
    serde_json::from_value(json!({
        "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkACL",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn sg(name: &str, spec: serde_json::Value) -> SecurityGroup {
    serde_json::from_value(json!({
        "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn msg(v: Verdict) -> String {
    v.expect_err("expected a rejection").to_string()
}

fn acl_msg(ingress: serde_json::Value) -> String {
    msg(validate_network_acl_create(
        &acl("x", json!({"vpc": "a", "ingress": ingress})),
        &snap(),
    ))
}

fn sg_msg(spec: serde_json::Value) -> String {
    msg(validate_security_group_create(&sg("x", spec), &snap()))
}

#[test]
fn pol_01_acl_vpc_must_exist_and_is_immutable() {
    let s = snap();
    assert_eq!(
        msg(validate_network_acl_create(
            &acl("x", json!({"vpc": "nope"})),
            &s
        )),
        "spec.vpc: Vpc \"nope\" does not exist; create it first"
    );
    assert_eq!(
        msg(validate_network_acl_create(
            &acl("x", json!({"vpc": ""})),
            &s
        )),
        "spec.vpc: required: every NetworkACL belongs to exactly one Vpc"
    );
    let old = acl("x", json!({"vpc": "a"}));
    assert!(validate_network_acl_create(&old, &s).is_ok());
    assert!(
        msg(validate_network_acl_update(
            &old,
            &acl("x", json!({"vpc": "b"})),
            &s
        ))
        .starts_with("spec.vpc: is immutable")
    );
    let edited = acl(
        "x",
        json!({"vpc": "a", "egress": [{"priority": 0, "action": "deny"}]}),
    );
    assert_eq!(
        msg(validate_network_acl_update(&old, &edited, &s)),
        "spec.egress[0] (priority 0): priority 0 is outside 1-65535"
    );
}

#[test]
fn pol_01_acl_priorities_are_1_to_65535_and_unique_per_direction() {
    assert_eq!(
        acl_msg(json!([{"priority": 65536, "action": "allow"}])),
        "spec.ingress[0] (priority 65536): priority 65536 is outside 1-65535"
    );
    assert_eq!(
        acl_msg(json!([
            {"priority": 10, "action": "allow"},
            {"priority": 20, "action": "allow"},
            {"priority": 10, "action": "deny"}
        ])),
        "spec.ingress[2] (priority 10): priority 10 is also spec.ingress[0]'s; priorities are unique per direction: give one of them another"
    );
    // The same priority in the other direction is no clash.
    let both = acl(
        "x",
        json!({"vpc": "a",
            "ingress": [{"priority": 10, "action": "allow"}],
            "egress": [{"priority": 10, "action": "deny"}]}),
    );
    assert!(validate_network_acl_create(&both, &snap()).is_ok());
}

#[test]
fn pol_01_acl_action_protocol_ports_and_cidr_name_the_entry_and_the_fix() {
    assert_eq!(
        acl_msg(json!([{"priority": 5, "action": "reject"}])),
        "spec.ingress[0] (priority 5): action \"reject\" is neither allow nor deny"
    );
    assert_eq!(
        acl_msg(
            json!([{"priority": 1, "action": "allow"}, {"priority": 2, "action": "allow"},
            {"priority": 100, "action": "allow", "protocol": "6"}])
        ),
        "spec.ingress[2] (priority 100): protocol \"6\" is a quoted number; write it as an integer (6) or use a name (all, icmp, tcp, udp, sctp, gre, esp, ah)"
    );
    assert!(
        acl_msg(json!([{"priority": 1, "action": "allow", "protocol": 300}]))
            .contains("protocol 300 is outside 0-255")
    );
    assert_eq!(
        acl_msg(
            json!([{"priority": 1, "action": "allow", "protocol": "icmp", "ports": [{"port": 80}]}])
        ),
        "spec.ingress[0] (priority 1): ports are for tcp and udp only, and protocol is icmp; remove ports or set protocol tcp or udp"
    );
    assert_eq!(
        acl_msg(json!([{"priority": 1, "action": "allow", "protocol": "tcp",
            "ports": [{"port": 80}, {"portRange": {"from": 90, "to": 80}}]}])),
        "spec.ingress[0] (priority 1): ports[1]: ports 90-80 are not a range within 1-65535 (from <= to)"
    );
    assert_eq!(
        acl_msg(json!([{"priority": 1, "action": "deny", "cidr": "10.1.2.3/24"}])),
        "spec.ingress[0] (priority 1): cidr 10.1.2.3/24 has host bits set; use 10.1.2.0/24"
    );
    assert!(
        acl_msg(json!([{"priority": 1, "action": "deny", "cidr": "fd00::/64"}])).contains("IPv6")
    );
    // A protocol number with ports (17 is udp) and a normalised prefix pass.
    let ok = acl(
        "x",
        json!({"vpc": "a", "ingress": [{"priority": 1, "action": "allow", "protocol": 17,
            "cidr": "10.1.2.0/24", "ports": [{"port": 53}]}]}),
    );
    assert!(validate_network_acl_create(&ok, &snap()).is_ok());
}

#[test]
fn pol_01_acl_holds_at_most_128_rules_and_64_ports_per_rule() {
    let rules = |n: u32| {
        (1..=n)
            .map(|p| json!({"priority": p, "action": "allow"}))
            .collect::<Vec<_>>()
    };
    let full = acl("x", json!({"vpc": "a", "egress": rules(128)}));
    assert!(validate_network_acl_create(&full, &snap()).is_ok());
    let over = acl("x", json!({"vpc": "a", "egress": rules(129)}));
    assert!(
        msg(validate_network_acl_create(&over, &snap()))
            .starts_with("spec.egress: holds 129 rules; at most 128 per direction")
    );
    let ports: Vec<_> = (1..=65).map(|p| json!({"port": p})).collect();
    assert!(
        acl_msg(json!([{"priority": 1, "action": "allow", "protocol": "tcp", "ports": ports}]))
            .starts_with("spec.ingress[0] (priority 1): holds 65 ports; at most 64 per rule")
    );
}

#[test]
fn pol_02_sg_peers_are_one_of_cidr_and_a_group_of_the_same_vpc() {
    assert_eq!(
        sg_msg(json!({"vpc": "nope"})),
        "spec.vpc: Vpc \"nope\" does not exist; create it first"
    );
    assert_eq!(
        sg_msg(json!({"vpc": "a", "ingress": [{"from": [{}]}]})),
        "spec.ingress[0].from[0]: set exactly one of cidr and securityGroupRef (found neither)"
    );
    assert_eq!(
        sg_msg(
            json!({"vpc": "a", "egress": [{"to": [{"cidr": "10.0.0.0/8", "securityGroupRef": {"name": "web-sg"}}]}]})
        ),
        "spec.egress[0].to[0]: set exactly one of cidr and securityGroupRef (found both)"
    );
    assert_eq!(
        sg_msg(json!({"vpc": "a", "ingress": [{"from": [{"cidr": "10.1.0.1/16"}]}]})),
        "spec.ingress[0].from[0]: cidr 10.1.0.1/16 has host bits set; use 10.1.0.0/16"
    );
    assert_eq!(
        sg_msg(
            json!({"vpc": "a", "ingress": [{"from": [{"securityGroupRef": {"name": "ghost"}}]}]})
        ),
        "spec.ingress[0].from[0]: securityGroupRef \"ghost\" names no SecurityGroup; create it first or remove this peer"
    );
    assert_eq!(
        sg_msg(
            json!({"vpc": "a", "ingress": [{"from": [{"securityGroupRef": {"name": "b-sg"}}]}]})
        ),
        "spec.ingress[0].from[0]: securityGroupRef \"b-sg\" is a SecurityGroup of Vpc \"b\", not \"a\"; a peer group must be of the same Vpc"
    );
    assert_eq!(
        sg_msg(json!({"vpc": "a", "ingress": [{"protocol": "udpp"}]})),
        "spec.ingress[0]: protocol \"udpp\" is unknown; use all, icmp, tcp, udp, sctp, gre, esp, ah or a number 0-255"
    );
    assert_eq!(
        sg_msg(json!({"vpc": "a", "ingress": [{"ports": [{"port": 22}]}]})),
        "spec.ingress[0]: ports are for tcp and udp only, and protocol is all; remove ports or set protocol tcp or udp"
    );
    // A group of the same Vpc, and the group itself, resolve.
    let ok = sg(
        "x",
        json!({"vpc": "a", "ingress": [{"protocol": "tcp", "ports": [{"port": 22}],
            "from": [{"securityGroupRef": {"name": "web-sg"}}, {"securityGroupRef": {"name": "x"}},
                     {"cidr": "192.168.0.0/16"}]}]}),
    );
    assert!(validate_security_group_create(&ok, &snap()).is_ok());
}

#[test]
fn pol_02_sg_holds_at_most_128_rules_64_peers_and_64_ports_per_rule() {
    let peers = |n: u32| {
        (0..n)
            .map(|i| json!({"cidr": format!("10.{}.0.0/16", i)}))
            .collect::<Vec<_>>()
    };
    let s = snap();
    let ok = sg("x", json!({"vpc": "a", "ingress": [{"from": peers(64)}]}));
    assert!(validate_security_group_create(&ok, &s).is_ok());
    assert!(
        sg_msg(json!({"vpc": "a", "ingress": [{"from": peers(65)}]}))
            .starts_with("spec.ingress[0]: holds 65 peers in from; at most 64 per rule")
    );
    let rules: Vec<_> = (0..129).map(|_| json!({})).collect();
    assert!(
        sg_msg(json!({"vpc": "a", "egress": rules}))
            .starts_with("spec.egress: holds 129 rules; at most 128 per direction")
    );
    let full: Vec<_> = (0..128).map(|_| json!({})).collect();
    assert!(
        validate_security_group_create(&sg("x", json!({"vpc": "a", "egress": full})), &s).is_ok()
    );
    let ports: Vec<_> = (1..=65).map(|p| json!({"port": p})).collect();
    assert!(
        sg_msg(json!({"vpc": "a", "egress": [{"protocol": "udp", "ports": ports}]}))
            .starts_with("spec.egress[0]: holds 65 ports; at most 64 per rule")
    );
}

#[test]
fn pol_02_sg_problems_split_unresolved_peers_from_invalid_rules() {
    let spec = sg(
        "x",
        json!({"vpc": "a", "ingress": [{"from": [{"securityGroupRef": {"name": "ghost"}}]},
            {"protocol": "\"x\""}]}),
    )
    .spec;
    let p = sg_rule_problems("x", &spec, &snap());
    assert_eq!(p.unresolved.len(), 1, "{p:?}");
    assert_eq!(p.invalid.len(), 1, "{p:?}");
    assert_eq!(p.invalid[0].field, "spec.ingress[1]");
}

fn nic(ns: &str, name: &str, groups: &[&str]) -> NetworkInterface {
    let mut n = NetworkInterface::new(
        name,
        NetworkInterfaceSpec {
            interface: "eth0".into(),
            subnet: Some("web".into()),
            security_groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            pod_ref: PodRef { name: "p".into() },
            ..Default::default()
        },
    );
    n.metadata.namespace = Some(ns.into());
    n
}

#[test]
fn pol_03_a_security_group_in_use_cannot_be_deleted_nor_moved() {
    let mut s = snap();
    assert!(validate_delete_security_group("web-sg", &s).is_ok());
    s.interfaces.push(nic("shop", "p.eth0", &["web-sg"]));
    s.security_groups.push(sg(
        "db-sg",
        json!({"vpc": "a", "ingress": [{"from": [{"securityGroupRef": {"name": "web-sg"}}]}]}),
    ));
    // Naming itself is no use that keeps it.
    s.security_groups.push(sg(
        "self-sg",
        json!({"vpc": "a", "ingress": [{"from": [{"securityGroupRef": {"name": "self-sg"}}]}]}),
    ));
    assert_eq!(
        msg(validate_delete_security_group("web-sg", &s)),
        "metadata.name: SecurityGroup \"web-sg\" is used by NetworkInterfaces \"shop/p.eth0\" and SecurityGroups \"db-sg\"; delete those Pods or remove the group from their annotations, and remove the securityGroupRef peers, first"
    );
    assert!(validate_delete_security_group("self-sg", &s).is_ok());
    let old = s.security_group("web-sg").unwrap().clone();
    let mut moved = old.clone();
    moved.spec.vpc = "b".into();
    assert!(
        msg(validate_security_group_update(&old, &moved, &s))
            .starts_with("spec.vpc: cannot change while NetworkInterfaces \"shop/p.eth0\"")
    );
    let unused = s.security_group("self-sg").unwrap().clone();
    let mut moved = unused.clone();
    moved.spec.vpc = "b".into();
    moved.spec.ingress = None;
    assert!(validate_security_group_update(&unused, &moved, &s).is_ok());
}

#[test]
fn pol_03_a_vpc_goes_only_when_its_acls_and_groups_are_gone() {
    let mut s = snap();
    s.subnets.clear();
    s.network_acls.push(acl("b-acl", json!({"vpc": "b"})));
    assert_eq!(
        msg(validate_delete_vpc("b", &s)),
        "metadata.name: Vpc \"b\" still has NetworkACLs \"b-acl\" and SecurityGroups \"b-sg\"; delete them first"
    );
    s.network_acls.clear();
    s.security_groups
        .retain(|g| g.metadata.name.as_deref() != Some("b-sg"));
    assert!(validate_delete_vpc("b", &s).is_ok());
}

fn pod(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                format!("{}{k}", crate::api::ANNOTATION_PREFIX),
                (*v).to_owned(),
            )
        })
        .collect()
}

fn with_l2(s: &mut Snapshot, name: &str, cidr: &str, gateway: bool) {
    s.l2networks.push(L2Network::new(
        name,
        L2NetworkSpec {
            vpc: "a".into(),
            cidr: Some(cidr.into()),
            gateway: gateway.then(L2Gateway::default),
            ..Default::default()
        },
    ));
}

#[test]
fn pol_02_a_nics_groups_exist_and_are_of_its_segments_vpc() {
    let s = snap();
    let one = |groups: &str| {
        validate_pod_create(&pod(&[("subnet", "web"), ("security-groups", groups)]), &s)
    };
    assert!(one("web-sg").is_ok());
    assert_eq!(
        msg(one("web-sg, ghost")),
        "metadata.annotations: eth0: SecurityGroup \"ghost\" does not exist; create it first"
    );
    assert_eq!(
        msg(one("b-sg")),
        "metadata.annotations: eth0: SecurityGroup \"b-sg\" belongs to Vpc \"b\", but Subnet \"web\" is of Vpc \"a\"; use a group of Vpc \"a\""
    );
}

#[test]
fn l2_19_enforced_security_groups_exempt_gateway_less_l2networks() {
    let mut s = snap();
    s.vpcs[0].spec.enforce_security_groups = true;
    with_l2(&mut s, "pure", "10.8.0.0/24", false);
    with_l2(&mut s, "routed", "10.9.0.0/24", true);
    let check = |a: &[(&str, &str)]| validate_pod_create(&pod(a), &s);
    assert_eq!(
        msg(check(&[("subnet", "web")])),
        "metadata.annotations: eth0: Vpc \"a\" has spec.enforceSecurityGroups, so every NIC on its Subnets and gateway L2Networks carries a SecurityGroup, and eth0 on Subnet \"web\" has none; add annotation juneau.loutres.me/security-groups (eth0) or securityGroups in its networks entry, naming a SecurityGroup of Vpc \"a\""
    );
    assert!(check(&[("subnet", "web"), ("security-groups", "web-sg")]).is_ok());
    let eth1 = |entry: &str| {
        let networks = format!(
            "[{{\"interface\":\"eth0\",\"subnet\":\"web\",\"securityGroups\":[\"web-sg\"]}},{entry}]"
        );
        validate_pod_create(&pod(&[("networks", networks.as_str())]), &s)
    };
    // A gateway-less L2Network needs none (and takes none: L2-19).
    assert!(eth1(r#"{"interface":"eth1","l2Network":"pure"}"#).is_ok());
    assert!(
        msg(eth1(r#"{"interface":"eth1","l2Network":"routed"}"#))
            .contains("eth1 on L2Network \"routed\" has none")
    );
    assert!(
        eth1(r#"{"interface":"eth1","l2Network":"routed","securityGroups":["web-sg"]}"#).is_ok()
    );
    // Without the flag, no group is required.
    s.vpcs[0].spec.enforce_security_groups = false;
    assert!(validate_pod_create(&pod(&[("subnet", "web")]), &s).is_ok());
}
