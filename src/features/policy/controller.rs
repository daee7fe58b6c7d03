//! NetworkACL and SecurityGroup status (POL-01, POL-02, POL-03, L2-23): the rule set's
//! id in the datapath, its version, counts, what uses it, and whether its rules hold.
//!
//! NetworkACLs and SecurityGroups share one id space, 1 to [`MAX_POLICY_ID`]: every
//! Node's datapath indexes one map of rule sets by it. An id is kept once given (read
//! back from the stored status), so a rule set never changes id under live traffic;
//! new objects get the lowest free ids in name order, so two controllers reading the
//! same objects give the same ids. The segments' `status.networkACL` reads the ids of
//! the same pass ([`acl_refs`]), so a new ACL's id reaches its segments in one pass.
//!
//! `RulesValid` uses the admission checks themselves (`admission::validate::
//! acl_rule_problems`, `sg_rule_problems`), so a stored object that slipped through is
//! reported in admission's words. A SecurityGroup peer naming no group of the Vpc (its
//! group deleted in a race) is reported and dropped: the rest of the group stays in
//! force and keeps its `rulesetVersion`; a rule whose every peer is dropped matches
//! nothing (0 entries), never everything.
use std::collections::{BTreeMap, btree_map::Entry};

use crate::{
    admission::{
        Rejection,
        validate::{SgProblems, Snapshot, acl_rule_problems, sg_rule_problems},
    },
    alloc::Pool,
    api::{
        NetworkACL, NetworkInterface, SecurityGroup,
        condition::Condition,
        l2network::AclRef,
        networkacl::{AclRule, NetworkAclStatus},
        securitygroup::{SecurityGroupStatus, SgRuleView},
    },
    cluster::key,
};

/// The highest rule-set id (12 bits: the datapath's id field).
pub const MAX_POLICY_ID: u32 = 4095;

/// The ids of one pass, by name (no entry: none free).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyIds {
    pub acl: BTreeMap<String, u32>,
    pub sg: BTreeMap<String, u32>,
}

/// The two kinds in the one id space, in the order their objects are visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Acl,
    Sg,
}

fn name<K: kube::Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

/// Gives every NetworkACL and SecurityGroup its id: the one its status holds when
/// valid and not taken by an object earlier in name order, else the lowest free one.
pub fn assign_ids(snap: &Snapshot) -> PolicyIds {
    let mut all: Vec<(String, Kind, u32)> = snap
        .network_acls
        .iter()
        .map(|a| {
            (
                name(a),
                Kind::Acl,
                a.status.as_ref().map_or(0, |s| s.acl_id),
            )
        })
        .chain(snap.security_groups.iter().map(|g| {
            (
                name(g),
                Kind::Sg,
                g.status.as_ref().map_or(0, |s| s.group_id),
            )
        }))
        .collect();
    all.sort();
    let mut pool = Pool::new([(1, MAX_POLICY_ID)]);
    let mut given: BTreeMap<(Kind, String), u32> = BTreeMap::new();
    for (n, kind, old) in &all {
        if let Ok(id) = pool.claim(*old) {
            given.insert((*kind, n.clone()), id);
        }
    }
    for (n, kind, _) in &all {
        if let Entry::Vacant(e) = given.entry((*kind, n.clone())) {
            let Some(id) = pool.first_free() else { break };
            e.insert(id);
        }
    }
    let mut ids = PolicyIds::default();
    for ((kind, n), id) in given {
        match kind {
            Kind::Acl => ids.acl.insert(n, id),
            Kind::Sg => ids.sg.insert(n, id),
        };
    }
    ids
}

/// The version the datapath is given: the spec's generation (the embedded store sets
/// none: "1"); empty while the rules cannot be given to it.
fn ruleset_version<K: kube::Resource>(o: &K, valid: bool) -> String {
    if !valid {
        return String::new();
    }
    o.meta()
        .generation
        .map_or_else(|| "1".to_owned(), |g| g.to_string())
}

/// What a segment's `status.networkACL` says of each NetworkACL, from this pass's ids.
pub fn acl_refs(snap: &Snapshot, ids: &PolicyIds) -> BTreeMap<String, AclRef> {
    snap.network_acls
        .iter()
        .map(|a| {
            let n = name(a);
            let valid = acl_rule_problems(&a.spec).is_empty();
            let r = AclRef {
                acl_id: ids.acl.get(&n).copied().unwrap_or(0),
                ruleset_version: ruleset_version(a, valid),
            };
            (n, r)
        })
        .collect()
}

/// Problems as one condition message: the first few, and how many more.
fn summary(problems: &[Rejection]) -> String {
    const SHOWN: usize = 3;
    let mut m = problems
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if problems.len() > SHOWN {
        m.push_str(&format!(" (and {} more)", problems.len() - SHOWN));
    }
    m
}

/// `RulesValid`, then `Ready`: the rules hold, the Vpc exists and an id was free.
fn conditions(rules: Condition, vpc: &str, id: u32, snap: &Snapshot) -> Vec<Condition> {
    let ready = if rules.status != "True" {
        Condition::new("Ready", false, &rules.reason, rules.message.clone())
    } else if snap.vpc(vpc).is_none() {
        Condition::new(
            "Ready",
            false,
            "VpcNotFound",
            format!("Vpc {vpc:?} does not exist"),
        )
    } else if id == 0 {
        Condition::new(
            "Ready",
            false,
            "IDsExhausted",
            format!(
                "all {MAX_POLICY_ID} rule-set ids are held by NetworkACLs and SecurityGroups; delete unused ones"
            ),
        )
    } else {
        Condition::new("Ready", true, "Ready", "")
    };
    vec![rules, ready]
}

fn acl_entries(rules: Option<&[AclRule]>) -> (u32, u32) {
    let rules = rules.unwrap_or_default();
    let entries = rules.iter().map(|r| r.ports.len().max(1)).sum::<usize>();
    (rules.len() as u32, entries as u32)
}

fn acl_status(a: &NetworkACL, id: u32, snap: &Snapshot) -> NetworkAclStatus {
    let n = name(a);
    let problems = acl_rule_problems(&a.spec);
    let rules = if problems.is_empty() {
        Condition::new("RulesValid", true, "Valid", "")
    } else {
        Condition::new("RulesValid", false, "InvalidRules", summary(&problems))
    };
    let mut attached: Vec<String> = snap
        .subnets
        .iter()
        .filter(|s| s.spec.network_acl.as_deref() == Some(n.as_str()))
        .map(|s| format!("Subnet/{}", name(s)))
        .chain(
            snap.l2networks
                .iter()
                .filter(|l| l.spec.network_acl.as_deref() == Some(n.as_str()))
                .map(|l| format!("L2Network/{}", name(l))),
        )
        .collect();
    attached.sort();
    let (ingress_rules, ingress_entries) = acl_entries(a.spec.ingress.as_deref());
    let (egress_rules, egress_entries) = acl_entries(a.spec.egress.as_deref());
    NetworkAclStatus {
        acl_id: id,
        ruleset_version: ruleset_version(a, problems.is_empty()),
        ingress_rules,
        egress_rules,
        ingress_entries,
        egress_entries,
        attached,
        conditions: conditions(rules, &a.spec.vpc, id, snap),
    }
}

/// Rules and entries of one direction: max(1, #peers) x max(1, #ports) per rule, the
/// peers counted once the unresolved ones are dropped (a rule left with none counts 0).
fn sg_entries(me: &str, vpc: &str, rules: &[SgRuleView<'_>], snap: &Snapshot) -> (u32, u32) {
    let resolves = |p: &crate::api::securitygroup::SgPeer| match &p.security_group_ref {
        None => true,
        Some(r) => {
            r.name == me
                || snap
                    .security_group(&r.name)
                    .is_some_and(|g| g.spec.vpc == vpc)
        }
    };
    let entries: usize = rules
        .iter()
        .map(|r| {
            let peers = r.peers.iter().filter(|p| resolves(p)).count();
            let peers = if r.peers.is_empty() { 1 } else { peers };
            peers * r.ports.len().max(1)
        })
        .sum();
    (rules.len() as u32, entries as u32)
}

fn sg_status(
    g: &SecurityGroup,
    id: u32,
    snap: &Snapshot,
    nics: &[NetworkInterface],
) -> SecurityGroupStatus {
    let n = name(g);
    let SgProblems {
        invalid,
        unresolved,
    } = sg_rule_problems(&n, &g.spec, snap);
    let rules = if !invalid.is_empty() {
        Condition::new("RulesValid", false, "InvalidRules", summary(&invalid))
    } else if !unresolved.is_empty() {
        Condition::new(
            "RulesValid",
            false,
            "UnresolvedReferences",
            format!(
                "{}; these peers are dropped, the other rules are in force",
                summary(&unresolved)
            ),
        )
    } else {
        Condition::new("RulesValid", true, "Valid", "")
    };
    let ingress: Vec<_> = g.spec.ingress.iter().flatten().map(|r| r.view()).collect();
    let egress: Vec<_> = g.spec.egress.iter().flatten().map(|r| r.view()).collect();
    let (ingress_rules, ingress_entries) = sg_entries(&n, &g.spec.vpc, &ingress, snap);
    let (egress_rules, egress_entries) = sg_entries(&n, &g.spec.vpc, &egress, snap);
    let mut attached_interfaces: Vec<String> = nics
        .iter()
        .filter(|nic| nic.spec.security_groups.contains(&n))
        .map(key)
        .collect();
    attached_interfaces.sort();
    // What a securityGroupRef to this group matches, on every Node: the daemons read
    // only their own Node's NICs, so the controller gathers them here.
    let mut members: Vec<String> = nics
        .iter()
        .filter(|nic| nic.spec.security_groups.contains(&n))
        .filter_map(|nic| nic.status.as_ref())
        .filter_map(|st| Some(st.address?.addr().to_string()))
        .collect();
    members.sort();
    members.dedup();
    SecurityGroupStatus {
        group_id: id,
        ruleset_version: ruleset_version(g, invalid.is_empty()),
        ingress_rules,
        egress_rules,
        ingress_entries,
        egress_entries,
        attached_interfaces,
        members,
        conditions: conditions(rules, &g.spec.vpc, id, snap),
    }
}

/// The statuses of one pass, by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyStatus {
    pub network_acls: BTreeMap<String, NetworkAclStatus>,
    pub security_groups: BTreeMap<String, SecurityGroupStatus>,
}

/// Every NetworkACL's and SecurityGroup's status, with `ids` from [`assign_ids`] and
/// the NICs (`nics`) as this pass makes them.
pub fn reconcile_all(snap: &Snapshot, ids: &PolicyIds, nics: &[NetworkInterface]) -> PolicyStatus {
    let network_acls = snap
        .network_acls
        .iter()
        .map(|a| {
            let n = name(a);
            let id = ids.acl.get(&n).copied().unwrap_or(0);
            (n, acl_status(a, id, snap))
        })
        .collect();
    let security_groups = snap
        .security_groups
        .iter()
        .map(|g| {
            let n = name(g);
            let id = ids.sg.get(&n).copied().unwrap_or(0);
            (n, sg_status(g, id, snap, nics))
        })
        .collect();
    PolicyStatus {
        network_acls,
        security_groups,
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
