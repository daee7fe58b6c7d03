//! POL-03 trace steps on a small Vpc: Subnets `web` (NetworkACL `web-acl`, set 7) and
//! `db`, a gateway L2Network `lan`; SecurityGroup `db` (set 12) on the database NIC.
use serde_json::{Value, json};

use super::*;
use crate::{
    api::{L2Network, NetworkACL, NetworkEndpoint, SecurityGroup, Subnet},
    cli::{trace, trace::Hop},
};

fn obj<T: serde::de::DeserializeOwned>(kind: &str, name: &str, spec: Value, status: Value) -> T {
    serde_json::from_value(
        json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": status}),
    )
    .unwrap_or_else(|e| panic!("{kind} {name}: {e}"))
}

/// `(pod, segment key, segment, address, vni, node, groups)`.
type NicRow = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    u32,
    &'static str,
    &'static [&'static str],
);

const NICS: [NicRow; 4] = [
    ("client", "subnet", "web", "10.1.0.5", 11, "n1", &[]),
    ("web2", "subnet", "web", "10.1.0.7", 11, "n1", &["db"]),
    ("db", "subnet", "db", "10.2.0.6", 12, "n2", &["db"]),
    ("box", "l2Network", "lan", "10.3.0.8", 13, "n2", &["db"]),
];

fn world() -> World {
    let mut w = World::default();
    let o = &mut w.objects;
    for (name, cidr, vni, acl) in [
        ("web", "10.1.0.0/24", 11, Some("web-acl")),
        ("db", "10.2.0.0/24", 12, None),
    ] {
        o.subnets.push(obj::<Subnet>(
            "Subnet",
            name,
            json!({"vpc": "v", "cidr": cidr, "networkACL": acl}),
            json!({"vni": vni}),
        ));
    }
    o.l2networks.push(obj::<L2Network>(
        "L2Network",
        "lan",
        json!({"vpc": "v", "cidr": "10.3.0.0/24", "gateway": {}}),
        json!({"vni": 13}),
    ));
    // Egress: deny tcp/5432 to db's Subnet at priority 10, allow the rest of it at 20.
    o.network_acls.push(obj::<NetworkACL>(
        "NetworkACL",
        "web-acl",
        json!({"vpc": "v", "egress": [
            {"priority": 20, "action": "allow", "protocol": "tcp", "cidr": "10.2.0.0/24"},
            {"priority": 10, "action": "deny", "protocol": "tcp", "cidr": "10.2.0.0/24",
             "ports": [{"port": 5432}]},
        ]}),
        json!({"aclID": 7, "rulesetVersion": "3"}),
    ));
    // Ingress: tcp/80 from web's Subnet (rule 0), udp/53 from anywhere (rule 1).
    o.security_groups.push(obj::<SecurityGroup>(
        "SecurityGroup",
        "db",
        json!({"vpc": "v", "ingress": [
            {"from": [{"cidr": "10.1.0.0/24"}], "protocol": "tcp", "ports": [{"port": 80}]},
            {"protocol": "udp", "ports": [{"port": 53}]},
        ]}),
        json!({"groupID": 12, "rulesetVersion": "1"}),
    ));
    for (pod, key, seg, addr, vni, node, groups) in NICS {
        let name = format!("{pod}.eth0");
        let mut spec = json!({"interface": "eth0", "podRef": {"name": pod}, "nodeName": node,
            "securityGroups": groups});
        spec[key] = json!(seg);
        o.interfaces.push(obj(
            "NetworkInterface",
            &name,
            spec,
            json!({"address": format!("{addr}/24"), "vni": vni, "phase": "Ready"}),
        ));
        let mut ep = json!({"kind": "Pod", "address": format!("{addr}/24"), "nodeName": node,
            "nodeIp": "172.18.0.1", "macAddress": "02:00:00:00:00:01"});
        ep[key] = json!(seg);
        w.endpoints.push(obj::<NetworkEndpoint>(
            "NetworkEndpoint",
            &name,
            ep,
            json!({}),
        ));
    }
    w
}

fn nic<'w>(w: &'w World, pod: &str) -> &'w NetworkInterface {
    let name = format!("{pod}.eth0");
    w.objects
        .interfaces
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(&name))
        .unwrap()
}

fn lines(j: &Judgement) -> Vec<String> {
    j.steps.iter().map(|(_, s)| s.clone()).collect()
}

fn flow(proto: u8, port: u16) -> Flow {
    Flow {
        proto,
        port: Some(port),
    }
}

#[test]
fn pol_03_trace_names_the_rule_that_decided_each_step_in_order() {
    let w = world();
    let j = judge(&w, nic(&w, "client"), nic(&w, "db"), flow(6, 80));
    assert_eq!(
        lines(&j),
        [
            "source ACL egress (NetworkACL web-acl, set 7): allowed by priority 20",
            "destination SG ingress (SecurityGroup db, set 12): allowed by rule 0",
            "stateful: the connection's entry in jn_ct lets its replies through every hook",
        ]
    );
    assert_eq!(j.dropped, None);
    assert_eq!(
        j.steps.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
        [At::Source, At::Destination, At::Destination]
    );
}

#[test]
fn pol_03_trace_names_the_rule_that_denied_and_the_drop() {
    let w = world();
    // The ACL's priority 10 denies first, whatever comes after.
    let j = judge(&w, nic(&w, "client"), nic(&w, "db"), flow(6, 5432));
    assert_eq!(
        lines(&j),
        ["source ACL egress (NetworkACL web-acl, set 7): denied by priority 10"]
    );
    assert_eq!(j.dropped, Some("POLICY_ACL_EGRESS"));
    // Past the ACL, the SecurityGroup has no rule for tcp/8080.
    let j = judge(&w, nic(&w, "client"), nic(&w, "db"), flow(6, 8080));
    assert_eq!(
        lines(&j)[1],
        "destination SG ingress (SecurityGroup db, set 12): denied: no rule matched"
    );
    assert_eq!(j.dropped, Some("POLICY_SG_INGRESS"));
    // udp/53 has no ACL rule: the ACL denies by no match.
    let j = judge(&w, nic(&w, "client"), nic(&w, "db"), flow(17, 53));
    assert_eq!(
        lines(&j),
        ["source ACL egress (NetworkACL web-acl, set 7): denied: no rule matched"]
    );
    assert_eq!(j.dropped, Some("POLICY_ACL_EGRESS"));
}

#[test]
fn pol_03_trace_applies_acls_only_across_the_gateway() {
    let w = world();
    // Within Subnet web: the ACL is not met; web2's own SG egress is open (omitted).
    let j = judge(&w, nic(&w, "client"), nic(&w, "web2"), flow(6, 5432));
    assert_eq!(
        lines(&j)[0],
        "destination SG ingress (SecurityGroup db, set 12): denied: no rule matched"
    );
    assert!(!lines(&j).iter().any(|l| l.contains("ACL")), "{j:?}");
    // web2 sending: its SecurityGroup's egress is open, then the ACL across the gateway.
    let j = judge(&w, nic(&w, "web2"), nic(&w, "db"), flow(6, 80));
    assert_eq!(
        lines(&j)[..3],
        [
            "source ACL egress (NetworkACL web-acl, set 7): allowed by priority 20",
            "source SG egress (SecurityGroup db, set 12): allowed: the direction is open (omitted)",
            "destination SG ingress (SecurityGroup db, set 12): allowed by rule 0",
        ]
    );
}

#[test]
fn pol_03_trace_meets_a_gateway_l2networks_groups_only_across_the_gateway() {
    let mut w = world();
    // From Subnet db (no ACL) to lan: db's own SG egress is open, box's SG ingress judges.
    let j = judge(&w, nic(&w, "db"), nic(&w, "box"), flow(17, 53));
    assert_eq!(
        lines(&j)[..2],
        [
            "source SG egress (SecurityGroup db, set 12): allowed: the direction is open (omitted)",
            "destination SG ingress (SecurityGroup db, set 12): allowed by rule 1",
        ]
    );
    // A second NIC of lan: switched inside the segment, no policy at all.
    let mut other = nic(&w, "box").clone();
    other.metadata.name = Some("box2.eth0".into());
    other.status.as_mut().unwrap().address = "10.3.0.9/24".parse().ok();
    w.objects.interfaces.push(other);
    let j = judge(&w, nic(&w, "box2"), nic(&w, "box"), flow(6, 9999));
    assert_eq!(j, Judgement::default());
}

#[test]
fn pol_03_trace_denies_a_set_without_an_id() {
    let mut w = world();
    w.objects.security_groups[0].status = None;
    let j = judge(&w, nic(&w, "client"), nic(&w, "db"), flow(6, 80));
    assert_eq!(
        lines(&j),
        [
            "source ACL egress (NetworkACL web-acl, set 7): allowed by priority 20",
            "destination SG ingress (SecurityGroup db, pending): denied: the rule set has no id yet"
        ]
    );
    assert_eq!(j.dropped, Some("POLICY_SET_MISSING"));
}

#[test]
fn pol_03_trace_without_a_port_says_what_it_needs() {
    let w = world();
    let j = judge(&w, nic(&w, "client"), nic(&w, "db"), Flow::default());
    assert!(
        lines(&j)[0].ends_with("not judged: name the destination's port (<to>:<port>[/proto])")
    );
    assert_eq!(j.dropped, None);
}

#[test]
fn pol_03_trace_target_splits_port_and_protocol() {
    assert_eq!(split_target("db").unwrap(), ("db", Flow::default()));
    assert_eq!(split_target("db:80").unwrap(), ("db", flow(6, 80)));
    assert_eq!(
        split_target("10.2.0.6:53/udp").unwrap(),
        ("10.2.0.6", flow(17, 53))
    );
    assert_eq!(
        split_target("db/icmp").unwrap(),
        (
            "db",
            Flow {
                proto: 1,
                port: None
            }
        )
    );
    assert!(split_target("db:http").is_err());
    assert!(split_target("db:80/bogus").is_err());
}

fn hops_text(hops: &[Hop]) -> Vec<String> {
    hops.iter()
        .map(|h| format!("{} {}", h.node, h.what))
        .collect()
}

#[test]
fn pol_03_trace_puts_policy_steps_between_the_hops_on_their_nodes() {
    let w = world();
    let none = |_: &str, _: u32, _: &str| None;
    let text = hops_text(&trace::trace(&w, "default", "client", "db:80", &none).unwrap());
    let at = |want: &str| {
        text.iter()
            .position(|l| l.contains(want))
            .unwrap_or_else(|| panic!("{want:?} in {text:#?}"))
    };
    assert!(
        text[at("source ACL egress")].starts_with("n1 "),
        "{text:#?}"
    );
    assert!(
        text[at("destination SG ingress")].starts_with("n2 "),
        "{text:#?}"
    );
    assert!(at("routed by") < at("source ACL egress"));
    assert!(at("source ACL egress") < at("carried by VXLAN"));
    assert!(at("carried by VXLAN") < at("destination SG ingress"));
    assert!(at("destination SG ingress") < at("delivered to db.eth0"));
    // A denial ends the trace with its drop.
    let text = hops_text(&trace::trace(&w, "default", "client", "db:5432", &none).unwrap());
    assert_eq!(
        text.last().unwrap(),
        "n1 dropped: POLICY_ACL_EGRESS (counted in bpf dump drops, and by its rule set in bpf dump policy)"
    );
    assert!(!text.iter().any(|l| l.contains("VXLAN")), "{text:#?}");
}
