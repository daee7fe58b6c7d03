//! NetworkACLs and SecurityGroups as this Node's datapath holds them (pure): every
//! rule set of the cluster by its id (`status.aclID` / `status.groupID`), compiled
//! (`compile.rs`), and the SecurityGroups of this Node's NICs by (VNI, address). The
//! Vpc router's segments name their NetworkACL by [`acl_set`]. Anything named whose id
//! is not given yet is [`SET_PENDING`]: denied until it comes, never let through.
pub mod compile;
#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, net::Ipv4Addr};

use ipnet::Ipv4Net;
use juneau_common::policy::{SET_ACL, SET_PENDING, SET_SG};

pub use compile::{Compiled, Direction, Rule, Verdict};

use crate::{
    api::{NetworkACL, SecurityGroup},
    cluster::World,
};

/// What the datapath holds of policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyState {
    pub sets: BTreeMap<u32, Compiled>,
    /// This Node's NICs that carry SecurityGroups: (VNI, address) -> their sets.
    pub nics: BTreeMap<(u32, Ipv4Addr), [u16; 2]>,
}

fn name<T: kube::Resource>(o: &T) -> &str {
    o.meta().name.as_deref().unwrap_or_default()
}

fn version(v: &str) -> u32 {
    v.parse().unwrap_or(0)
}

fn group_id(world: &World, group: &str) -> u16 {
    world
        .objects
        .security_groups
        .iter()
        .find(|g| name(*g) == group)
        .and_then(|g| g.status.as_ref())
        .map(|s| s.group_id)
        .filter(|id| *id != 0 && *id < SET_PENDING as u32)
        .map(|id| id as u16)
        .unwrap_or(SET_PENDING)
}

/// A NetworkACL compiled; the problems its directions had.
pub fn compile_acl(acl: &NetworkACL) -> (Compiled, Vec<String>) {
    let (ingress, a) = compile::acl_direction(acl.spec.ingress.as_deref());
    let (egress, b) = compile::acl_direction(acl.spec.egress.as_deref());
    let problems = [
        a.map(|e| format!("ingress: {e}; it denies everything")),
        b.map(|e| format!("egress: {e}; it denies everything")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let version = acl
        .status
        .as_ref()
        .map(|s| version(&s.ruleset_version))
        .unwrap_or(0);
    (
        Compiled {
            kind: SET_ACL,
            version,
            dirs: [ingress, egress],
        },
        problems,
    )
}

/// A SecurityGroup compiled, its references resolved to the members of the groups of
/// its Vpc (`status.members`); the problems it had.
pub fn compile_sg(sg: &SecurityGroup, groups: &[SecurityGroup]) -> (Compiled, Vec<String>) {
    let vpc = &sg.spec.vpc;
    let members = |g: &str| -> Option<Vec<Ipv4Net>> {
        let group = groups
            .iter()
            .find(|o| name(*o) == g && &o.spec.vpc == vpc)?;
        Some(
            group
                .status
                .as_ref()
                .map(|s| {
                    s.members
                        .iter()
                        .filter_map(|m| m.split('/').next()?.parse::<Ipv4Addr>().ok())
                        .map(Ipv4Net::from)
                        .collect()
                })
                .unwrap_or_default(),
        )
    };
    let ingress = sg
        .spec
        .ingress
        .as_ref()
        .map(|r| r.iter().map(|r| r.view()).collect());
    let egress = sg
        .spec
        .egress
        .as_ref()
        .map(|r| r.iter().map(|r| r.view()).collect());
    let (ingress, mut problems) = compile::sg_direction(ingress, false, &members);
    let (egress, more) = compile::sg_direction(egress, true, &members);
    problems.extend(more);
    let version = sg
        .status
        .as_ref()
        .map(|s| version(&s.ruleset_version))
        .unwrap_or(0);
    (
        Compiled {
            kind: SET_SG,
            version,
            dirs: [ingress, egress],
        },
        problems,
    )
}

/// What `node`'s datapath holds for `world`, and a line for each problem (logged once
/// by the feature).
pub fn desired(world: &World, node: &str) -> (PolicyState, Vec<String>) {
    let objects = &world.objects;
    let mut state = PolicyState::default();
    let mut problems = Vec::new();
    for acl in &objects.network_acls {
        let id = acl.status.as_ref().map(|s| s.acl_id).unwrap_or(0);
        if id == 0 || id >= SET_PENDING as u32 {
            continue;
        }
        let (set, p) = compile_acl(acl);
        problems.extend(
            p.into_iter()
                .map(|p| format!("NetworkACL {}: {p}", name(acl))),
        );
        state.sets.insert(id, set);
    }
    for sg in &objects.security_groups {
        let id = sg.status.as_ref().map(|s| s.group_id).unwrap_or(0);
        if id == 0 || id >= SET_PENDING as u32 {
            continue;
        }
        let (set, p) = compile_sg(sg, &objects.security_groups);
        problems.extend(
            p.into_iter()
                .map(|p| format!("SecurityGroup {}: {p}", name(sg))),
        );
        state.sets.insert(id, set);
    }
    for nic in &objects.interfaces {
        if nic.spec.security_groups.is_empty() || nic.spec.node_name != node {
            continue;
        }
        let Some(st) = nic.status.as_ref() else {
            continue;
        };
        let Some(addr) = st.address.map(|a| a.addr()) else {
            continue;
        };
        if st.vni == 0 {
            continue;
        }
        let mut groups = [0u16; 2];
        for (slot, g) in groups.iter_mut().zip(&nic.spec.security_groups) {
            *slot = group_id(world, g);
        }
        state.nics.insert((st.vni, addr), groups);
    }
    (state, problems)
}
