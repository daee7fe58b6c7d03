//! The policy statuses: ids, versions, counts, users and conditions.
use serde_json::json;

use super::*;
use crate::{
    api::{
        Object, Vpc,
        networkinterface::{NetworkInterfaceSpec, PodRef},
        vpc::VpcSpec,
    },
    cluster::Cluster,
    controller::{Config, run_once},
    store::Store,
};

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

fn with_acl_id(mut a: NetworkACL, id: u32) -> NetworkACL {
    a.status = Some(NetworkAclStatus {
        acl_id: id,
        ..Default::default()
    });
    a
}

fn with_group_id(mut g: SecurityGroup, id: u32) -> SecurityGroup {
    g.status = Some(SecurityGroupStatus {
        group_id: id,
        ..Default::default()
    });
    g
}

fn snap() -> Snapshot {
    let mut s = Snapshot::default();
    s.vpcs.push(Vpc::new("a", VpcSpec::default()));
    s
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {conditions:?}"))
}

#[test]
fn pol_03_acls_and_groups_share_one_id_space_kept_once_given() {
    let mut s = snap();
    let spec = json!({"vpc": "a"});
    s.network_acls.push(with_acl_id(acl("b", spec.clone()), 2));
    s.network_acls.push(acl("c", spec.clone()));
    s.security_groups.push(sg("a", spec.clone()));
    // Claims 2 too: "b" comes first in name order and keeps it.
    s.security_groups
        .push(with_group_id(sg("d", spec.clone()), 2));
    let ids = assign_ids(&s);
    assert_eq!(ids.sg["a"], 1);
    assert_eq!(ids.acl["b"], 2);
    assert_eq!(ids.acl["c"], 3);
    assert_eq!(ids.sg["d"], 4);
    // Written back, they stay, also when a lower id frees up.
    let st = reconcile_all(&s, &ids, &[]);
    for a in &mut s.network_acls {
        a.status = st.network_acls.get(&name(a)).cloned();
    }
    for g in &mut s.security_groups {
        g.status = st.security_groups.get(&name(g)).cloned();
    }
    assert_eq!(assign_ids(&s), ids);
    s.security_groups.retain(|g| name(g) != "a");
    s.network_acls.push(acl("e", spec.clone()));
    let again = assign_ids(&s);
    assert_eq!((again.acl["b"], again.acl["c"], again.sg["d"]), (2, 3, 4));
    assert_eq!(again.acl["e"], 1, "the lowest free id");
    // A group and an ACL of the same name are two objects.
    s.security_groups.push(sg("e", spec));
    let both = assign_ids(&s);
    assert_eq!((both.acl["e"], both.sg["e"]), (1, 5));
}

#[test]
fn pol_03_ids_stop_at_4095_and_the_rest_are_not_ready() {
    let mut s = snap();
    for i in 1..=MAX_POLICY_ID {
        s.security_groups.push(with_group_id(
            sg(&format!("g{i:04}"), json!({"vpc": "a"})),
            i,
        ));
    }
    s.network_acls.push(acl("late", json!({"vpc": "a"})));
    let ids = assign_ids(&s);
    assert!(!ids.acl.contains_key("late"));
    let st = reconcile_all(&s, &ids, &[]);
    let late = &st.network_acls["late"];
    assert_eq!(late.acl_id, 0);
    assert_eq!(condition(&late.conditions, "Ready").reason, "IDsExhausted");
    assert_eq!(st.security_groups["g4095"].group_id, 4095);
}

#[test]
fn pol_01_acl_status_counts_rules_entries_users_and_version() {
    let mut s = snap();
    let mut a = acl(
        "guard",
        json!({"vpc": "a",
            "ingress": [
                {"priority": 10, "action": "allow", "protocol": "tcp",
                 "ports": [{"port": 22}, {"port": 80}, {"portRange": {"from": 8000, "to": 8080}}]},
                {"priority": 20, "action": "deny"}
            ],
            "egress": []}),
    );
    a.metadata.generation = Some(7);
    s.network_acls.push(a);
    s.subnets.push(serde_json::from_value(json!({
        "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Subnet",
        "metadata": {"name": "web"}, "spec": {"vpc": "a", "cidr": "10.1.0.0/24", "networkACL": "guard"}
    })).unwrap());
    s.l2networks.push(
        serde_json::from_value(json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "L2Network",
            "metadata": {"name": "lab"},
            "spec": {"vpc": "a", "cidr": "10.2.0.0/24", "gateway": {}, "networkACL": "guard"}
        }))
        .unwrap(),
    );
    let st = &reconcile_all(&s, &assign_ids(&s), &[]).network_acls["guard"];
    assert_eq!(st.acl_id, 1);
    assert_eq!(st.ruleset_version, "7", "the spec's generation");
    assert_eq!((st.ingress_rules, st.ingress_entries), (2, 4));
    assert_eq!((st.egress_rules, st.egress_entries), (0, 0));
    assert_eq!(st.attached, ["L2Network/lab", "Subnet/web"]);
    assert_eq!(condition(&st.conditions, "RulesValid").status, "True");
    assert_eq!(condition(&st.conditions, "Ready").status, "True");
    // No generation (the embedded store): "1".
    s.network_acls[0].metadata.generation = None;
    let st = &reconcile_all(&s, &assign_ids(&s), &[]).network_acls["guard"];
    assert_eq!(st.ruleset_version, "1");
}

#[test]
fn pol_03_rules_that_slipped_through_are_reported_in_admissions_words() {
    let mut s = snap();
    s.network_acls.push(acl(
        "bad",
        json!({"vpc": "a", "ingress": [{"priority": 100, "action": "allow", "protocol": "6"}]}),
    ));
    s.network_acls.push(acl("orphan", json!({"vpc": "gone"})));
    let st = reconcile_all(&s, &assign_ids(&s), &[]);
    let bad = &st.network_acls["bad"];
    let rules = condition(&bad.conditions, "RulesValid");
    assert_eq!(
        (rules.status.as_str(), rules.reason.as_str()),
        ("False", "InvalidRules")
    );
    assert!(
        rules
            .message
            .starts_with("spec.ingress[0] (priority 100): protocol \"6\" is a quoted number"),
        "{}",
        rules.message
    );
    assert_eq!(
        bad.ruleset_version, "",
        "invalid rules are not given to the datapath"
    );
    assert_eq!(condition(&bad.conditions, "Ready").status, "False");
    assert_ne!(bad.acl_id, 0, "the id is held all the same");
    let orphan = &st.network_acls["orphan"];
    assert_eq!(condition(&orphan.conditions, "RulesValid").status, "True");
    assert_eq!(condition(&orphan.conditions, "Ready").reason, "VpcNotFound");
}

fn nic(ns: &str, name: &str, groups: &[&str]) -> NetworkInterface {
    let mut n = NetworkInterface::new(
        name,
        NetworkInterfaceSpec {
            interface: "eth0".into(),
            security_groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            pod_ref: PodRef { name: "p".into() },
            ..Default::default()
        },
    );
    n.metadata.namespace = Some(ns.into());
    n
}

#[test]
fn pol_02_sg_status_counts_members_and_drops_unresolved_peers() {
    let mut s = snap();
    s.security_groups.push(sg(
        "web",
        json!({"vpc": "a",
        "ingress": [
            {"protocol": "tcp", "ports": [{"port": 80}, {"port": 443}],
             "from": [{"cidr": "10.0.0.0/8"}, {"securityGroupRef": {"name": "ghost"}},
                      {"securityGroupRef": {"name": "web"}}, {"securityGroupRef": {"name": "db"}}]},
            {"from": [{"securityGroupRef": {"name": "ghost"}}]},
            {"protocol": "icmp"}
        ]}),
    ));
    s.security_groups.push(sg("db", json!({"vpc": "a"})));
    let nics = [
        nic("shop", "web-1.eth0", &["web"]),
        nic("default", "db-1.eth0", &["db", "web"]),
        nic("shop", "other.eth0", &[]),
    ];
    let st = reconcile_all(&s, &assign_ids(&s), &nics);
    let web = &st.security_groups["web"];
    // 3 resolved peers x 2 ports, a rule left without peers (0), one from anywhere (1).
    assert_eq!((web.ingress_rules, web.ingress_entries), (3, 7));
    assert_eq!((web.egress_rules, web.egress_entries), (0, 0));
    assert_eq!(
        web.attached_interfaces,
        ["default/db-1.eth0", "shop/web-1.eth0"]
    );
    let rules = condition(&web.conditions, "RulesValid");
    assert_eq!(rules.reason, "UnresolvedReferences");
    assert!(
        rules
            .message
            .contains("securityGroupRef \"ghost\" names no SecurityGroup")
    );
    assert!(
        rules
            .message
            .ends_with("these peers are dropped, the other rules are in force")
    );
    assert_eq!(web.ruleset_version, "1", "the rest is in force");
    assert_eq!(web.group_id, 2, "db comes first");
    let db = &st.security_groups["db"];
    assert_eq!(condition(&db.conditions, "Ready").status, "True");
    assert_eq!(db.attached_interfaces, ["default/db-1.eth0"]);
}

fn object(v: serde_json::Value) -> Object {
    Object::from_value(v).unwrap()
}

/// The embedded store end to end: admitted objects, one controller pass, and the
/// segments show their ACL's new id and version in that same pass.
#[test]
fn l2_23_segments_show_their_acls_id_in_the_pass_that_gives_it() {
    let store = Store::new();
    let api = "juneau.loutres.me/v1alpha1";
    for v in [
        json!({"apiVersion": api, "kind": "Vpc", "metadata": {"name": "a"}, "spec": {}}),
        json!({"apiVersion": api, "kind": "SecurityGroup", "metadata": {"name": "sg"},
               "spec": {"vpc": "a", "ingress": [{"from": [{"securityGroupRef": {"name": "sg"}}]}]}}),
        json!({"apiVersion": api, "kind": "NetworkACL", "metadata": {"name": "guard"},
               "spec": {"vpc": "a", "egress": [{"priority": 1, "action": "deny", "cidr": "10.9.0.0/16"}]}}),
        json!({"apiVersion": api, "kind": "Subnet", "metadata": {"name": "web"},
               "spec": {"vpc": "a", "cidr": "10.1.0.0/24", "networkACL": "guard"}}),
        json!({"apiVersion": api, "kind": "L2Network", "metadata": {"name": "lab"},
               "spec": {"vpc": "a", "cidr": "10.2.0.0/24", "gateway": {}, "networkACL": "guard"}}),
    ] {
        store.create(object(v)).unwrap();
    }
    let cfg = Config {
        default_subnet_cidr: None,
        ..Default::default()
    };
    assert!(run_once(&store, &cfg).unwrap());
    let (w, _) = Cluster::read(&store).unwrap();
    let s = &w.objects;
    let guard = s.network_acl("guard").unwrap().status.clone().unwrap();
    assert_eq!(guard.acl_id, 1);
    assert_eq!(guard.attached, ["L2Network/lab", "Subnet/web"]);
    let group = s.security_group("sg").unwrap().status.clone().unwrap();
    assert_eq!(group.group_id, 2);
    assert_eq!(condition(&group.conditions, "Ready").status, "True");
    let want = Some(AclRef {
        acl_id: 1,
        ruleset_version: "1".into(),
    });
    assert_eq!(
        s.subnet("web")
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .network_acl,
        want
    );
    assert_eq!(
        s.l2network("lab")
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .network_acl,
        want
    );
    // Written as `status.networkACL`, as L2-23 names it.
    let v = serde_json::to_value(s.subnet("web").unwrap()).unwrap();
    assert_eq!(v["status"]["networkACL"]["aclID"], 1);
    assert_eq!(v["spec"]["networkACL"], "guard");
    // A second pass changes nothing.
    assert!(!run_once(&store, &cfg).unwrap());
}
