use std::net::Ipv4Addr;

use juneau_common::policy::{DIR_OPEN, SET_PENDING};
use serde_json::json;

use super::compile::{self, range_prefixes};
use super::*;
use crate::api::networkacl::AclRule;

/// POL-01: a port range becomes the fewest prefixes that cover it exactly, for every
/// range of a sample that includes the edges (0, 1, 65535).
#[test]
fn pol_01_port_ranges_are_covered_exactly_by_their_prefixes() {
    let edges = [
        0u16, 1, 2, 79, 80, 443, 1023, 1024, 32767, 32768, 65534, 65535,
    ];
    for &a in &edges {
        for &b in edges.iter().filter(|&&b| b >= a) {
            let prefixes = range_prefixes(a, b);
            assert!(prefixes.len() <= 30, "{a}-{b}: {}", prefixes.len());
            let mut covered = 0u32;
            let mut next = a as u32;
            for (start, len) in prefixes {
                assert_eq!(start as u32, next, "{a}-{b}: contiguous");
                let size = 1u32 << (16 - len);
                assert_eq!(start as u32 % size, 0, "{a}-{b}: aligned");
                next += size;
                covered += size;
            }
            assert_eq!(next, b as u32 + 1, "{a}-{b}: ends at b");
            assert_eq!(covered, (b - a) as u32 + 1);
        }
    }
}

fn acl_rules(v: serde_json::Value) -> Vec<AclRule> {
    serde_json::from_value(v).unwrap()
}

/// POL-01: an omitted direction is open, `[]` denies, and a stored rule that is not
/// valid closes its whole direction (leaving out a deny would let traffic through).
#[test]
fn pol_01_acl_directions_open_when_omitted_and_fail_closed_when_invalid() {
    let (open, p) = compile::acl_direction(None);
    assert!(open.open && p.is_none());
    assert_eq!(open.header().flags & DIR_OPEN, DIR_OPEN);
    let (none, _) = compile::acl_direction(Some(&[]));
    assert!(!none.open && none.rules.is_empty());
    assert!(!none.judge(Ipv4Addr::new(10, 0, 0, 1), 6, 80).allows());
    let bad = acl_rules(json!([
        {"priority": 1, "action": "deny", "protocol": "tcp", "ports": [{"port": 22}]},
        {"priority": 2, "action": "allow", "protocol": "icmp", "ports": [{"port": 1}]},
    ]));
    let (closed, p) = compile::acl_direction(Some(&bad));
    assert!(
        p.unwrap()
            .contains("priority 2: ports are only for tcp and udp")
    );
    assert!(!closed.open && closed.rules.is_empty(), "denies everything");
}

/// POL-01: the compiled bits say what the model says: the peer trie's value for a
/// prefix is every rule holding it, the first rule that matches decides.
#[test]
fn pol_01_compiled_bits_follow_priority_and_containment() {
    let rules = acl_rules(json!([
        {"priority": 30, "action": "allow", "cidr": "10.0.0.0/8"},
        {"priority": 10, "action": "deny", "protocol": "tcp", "cidr": "10.1.0.0/16",
         "ports": [{"portRange": {"from": 1000, "to": 2000}}]},
    ]));
    let (d, _) = compile::acl_direction(Some(&rules));
    // Sorted by priority: the deny is rank 0.
    assert!(!d.rules[0].allow && d.rules[1].allow);
    let peers = d.peer_entries();
    let inner = peers[&"10.1.0.0/16".parse().unwrap()];
    let outer = peers[&"10.0.0.0/8".parse().unwrap()];
    assert_eq!(inner.w[0], 0b11, "the /16 is held by both rules");
    assert_eq!(outer.w[0], 0b10);
    let h = d.header();
    assert_eq!(h.allow.w[0], 0b10);
    assert_eq!(h.any_protocol.w[0], 0b10, "protocol all matches every port");
    assert!(!d.judge(Ipv4Addr::new(10, 1, 2, 3), 6, 1500).allows());
    assert!(d.judge(Ipv4Addr::new(10, 1, 2, 3), 6, 2001).allows());
    assert!(d.judge(Ipv4Addr::new(10, 2, 0, 1), 6, 1500).allows());
    assert!(!d.judge(Ipv4Addr::new(192, 168, 0, 1), 17, 53).allows());
}

fn world(objects: serde_json::Value) -> World {
    let mut w = World::default();
    for o in objects.as_array().unwrap() {
        match o["kind"].as_str().unwrap() {
            "NetworkACL" => w
                .objects
                .network_acls
                .push(serde_json::from_value(o.clone()).unwrap()),
            "SecurityGroup" => w
                .objects
                .security_groups
                .push(serde_json::from_value(o.clone()).unwrap()),
            "NetworkInterface" => w
                .objects
                .interfaces
                .push(serde_json::from_value(o.clone()).unwrap()),
            k => panic!("{k}"),
        }
    }
    w
}

/// POL-02, POL-03: every set with an id is held; a NIC's groups are by (VNI, address);
/// a group without an id yet is pending (denied in the datapath), and so is a segment's
/// ACL without one; a reference resolves to the group's members.
#[test]
fn pol_02_desired_holds_ids_members_and_pending_groups() {
    let meta = |n: &str| json!({"name": n});
    let w = world(json!([
        {"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup", "metadata": meta("web"),
         "spec": {"vpc": "v", "ingress": [{"from": [{"securityGroupRef": {"name": "db"}}]}]},
         "status": {"groupID": 5, "rulesetVersion": "3"}},
        {"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup", "metadata": meta("db"),
         "spec": {"vpc": "v"}, "status": {"groupID": 6, "members": ["10.0.0.7", "10.0.0.8"]}},
        {"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup", "metadata": meta("new"),
         "spec": {"vpc": "v"}},
        {"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkACL", "metadata": meta("edge"),
         "spec": {"vpc": "v"}},
        {"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkInterface",
         "metadata": {"name": "p.eth0", "namespace": "ns"},
         "spec": {"interface": "eth0", "subnet": "s", "securityGroups": ["web", "new"],
                  "podRef": {"name": "p"}, "nodeName": "n1"},
         "status": {"address": "10.0.0.5/24", "vni": 9}},
        {"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkInterface",
         "metadata": {"name": "q.eth0", "namespace": "ns"},
         "spec": {"interface": "eth0", "subnet": "s", "securityGroups": ["web"],
                  "podRef": {"name": "q"}, "nodeName": "n2"},
         "status": {"address": "10.0.0.6/24", "vni": 9}},
    ]));
    let (state, problems) = desired(&w, "n1");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(state.sets.keys().copied().collect::<Vec<_>>(), vec![5, 6]);
    assert_eq!(state.sets[&5].version, 3);
    let ingress = &state.sets[&5].dirs[0];
    assert_eq!(ingress.rules[0].peers.len(), 2, "db's members");
    assert!(ingress.judge(Ipv4Addr::new(10, 0, 0, 7), 6, 5432).allows());
    assert!(!ingress.judge(Ipv4Addr::new(10, 0, 0, 9), 6, 5432).allows());
    assert!(state.sets[&6].dirs[1].open, "omitted egress allows");
    assert!(!state.sets[&6].dirs[0].open, "omitted ingress denies");
    assert_eq!(
        state.nics,
        [((9, Ipv4Addr::new(10, 0, 0, 5)), [5, SET_PENDING])].into(),
        "this Node's NICs only; a group without an id is pending"
    );
    assert_eq!(w.objects.acl_set(Some("edge")), SET_PENDING as u32);
    assert_eq!(w.objects.acl_set(Some("gone")), SET_PENDING as u32);
    assert_eq!(w.objects.acl_set(None), 0);
}
