//! NetworkACL and SecurityGroup admission (POL-01, POL-02, POL-03). The rule checks
//! are pure functions of the spec (and, for a group's peers, the snapshot) that return
//! every problem found, not only the first: admission refuses the first, and the
//! controller's `RulesValid` condition (`controller::policy`) reports them for a stored
//! object that slipped through (one written before these rules, or a peer group
//! deleted in a race), so both say the same thing in the same words.
use crate::api::{
    NetworkACL, SecurityGroup,
    networkacl::{AclRule, NetworkACLSpec},
    policy_rule::{PortSpec, Protocol},
    securitygroup::{SecurityGroupSpec, SgPeer, SgRuleView},
};
use crate::{
    admission::validate::{Rejection, Snapshot, Verdict, reject},
    api::net::parse_cidr,
};

/// Rules per direction of one NetworkACL or SecurityGroup: the width of the
/// datapath's per-direction rule bitmap (the reference stops at 16 and 8 entries).
pub const MAX_RULES_PER_DIRECTION: usize = 128;
/// Peers (`from` / `to`) of one SecurityGroup rule.
pub const MAX_PEERS_PER_RULE: usize = 64;
/// Ports and port ranges of one rule.
pub const MAX_PORTS_PER_RULE: usize = 64;

/// What is wrong with a SecurityGroup's rules, split by what the controller does with
/// it: `invalid` rules cannot be given to the datapath at all; an `unresolved` peer
/// (a `securityGroupRef` naming no group of the Vpc) is reported and dropped, the rest
/// of the rule set stays in force (as the reference does).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SgProblems {
    pub invalid: Vec<Rejection>,
    pub unresolved: Vec<Rejection>,
}

fn name<K: kube::Resource>(o: &K) -> &str {
    o.meta().name.as_deref().unwrap_or("")
}

/// The checks every rule of either kind shares: its protocol, and ports only where the
/// protocol has them, each a valid range.
fn protocol_and_ports(at: &str, protocol: &Protocol, ports: &[PortSpec], out: &mut Vec<Rejection>) {
    if let Err(m) = protocol.number() {
        out.push(reject(at, m));
        return;
    }
    if ports.is_empty() {
        return;
    }
    if !protocol.has_ports() {
        let shown = match protocol {
            Protocol::Number(n) => n.to_string(),
            Protocol::Name(s) if s.is_empty() => "all".into(),
            Protocol::Name(s) => s.clone(),
        };
        out.push(reject(
            at,
            format!(
                "ports are for tcp and udp only, and protocol is {shown}; remove ports or set protocol tcp or udp"
            ),
        ));
        return;
    }
    if ports.len() > MAX_PORTS_PER_RULE {
        out.push(reject(
            at,
            format!(
                "holds {} ports; at most {MAX_PORTS_PER_RULE} per rule: join neighbours into a portRange or split the rule",
                ports.len()
            ),
        ));
    }
    for (k, p) in ports.iter().enumerate() {
        if let Err(m) = p.range() {
            out.push(reject(at, format!("ports[{k}]: {m}")));
        }
    }
}

/// A peer prefix: IPv4, normalised (there is no defaulter: `10.1.2.3/24` is refused
/// with the form to write, as for segments).
fn prefix(at: &str, cidr: &str, out: &mut Vec<Rejection>) {
    if cidr.contains(':') {
        out.push(reject(
            at,
            format!("cidr {cidr} is IPv6; rules take IPv4 prefixes only"),
        ));
    } else if let Err(m) = parse_cidr(cidr) {
        out.push(reject(at, format!("cidr {m}")));
    }
}

fn too_many_rules(field: String, count: usize, out: &mut Vec<Rejection>) {
    if count > MAX_RULES_PER_DIRECTION {
        out.push(reject(
            field,
            format!(
                "holds {count} rules; at most {MAX_RULES_PER_DIRECTION} per direction (the datapath's rule bitmap): merge rules, e.g. by ports or wider prefixes"
            ),
        ));
    }
}

fn acl_direction(dir: &str, rules: &[AclRule], out: &mut Vec<Rejection>) {
    too_many_rules(format!("spec.{dir}"), rules.len(), out);
    for (i, r) in rules.iter().enumerate() {
        let at = format!("spec.{dir}[{i}] (priority {})", r.priority);
        if !(1..=65535).contains(&r.priority) {
            out.push(reject(
                &at,
                format!("priority {} is outside 1-65535", r.priority),
            ));
        } else if let Some(j) = rules[..i].iter().position(|o| o.priority == r.priority) {
            out.push(reject(
                &at,
                format!(
                    "priority {} is also spec.{dir}[{j}]'s; priorities are unique per direction: give one of them another",
                    r.priority
                ),
            ));
        }
        if r.action != "allow" && r.action != "deny" {
            out.push(reject(
                &at,
                format!("action {:?} is neither allow nor deny", r.action),
            ));
        }
        protocol_and_ports(&at, &r.protocol, &r.ports, out);
        if !r.cidr.is_empty() {
            prefix(&at, &r.cidr, out);
        }
    }
}

/// Every problem of a NetworkACL's rules, in order (POL-01).
pub fn acl_rule_problems(spec: &NetworkACLSpec) -> Vec<Rejection> {
    let mut out = Vec::new();
    for (dir, rules) in [("ingress", &spec.ingress), ("egress", &spec.egress)] {
        if let Some(rules) = rules {
            acl_direction(dir, rules, &mut out);
        }
    }
    out
}

/// One peer: exactly one of a prefix and a group of the same Vpc (`me` may name
/// itself: its members reach each other).
fn peer(at: &str, p: &SgPeer, me: &str, vpc: &str, snap: &Snapshot, out: &mut SgProblems) {
    match (&p.cidr, &p.security_group_ref) {
        (Some(c), None) => prefix(at, c, &mut out.invalid),
        (None, Some(r)) if r.name == me => {}
        (None, Some(r)) => match snap.security_group(&r.name) {
            None => out.unresolved.push(reject(
                at,
                format!(
                    "securityGroupRef {:?} names no SecurityGroup; create it first or remove this peer",
                    r.name
                ),
            )),
            Some(g) if g.spec.vpc != vpc => out.unresolved.push(reject(
                at,
                format!(
                    "securityGroupRef {:?} is a SecurityGroup of Vpc {:?}, not {vpc:?}; a peer group must be of the same Vpc",
                    r.name, g.spec.vpc
                ),
            )),
            Some(_) => {}
        },
        (c, r) => out.invalid.push(reject(
            at,
            format!(
                "set exactly one of cidr and securityGroupRef (found {})",
                if c.is_some() && r.is_some() {
                    "both"
                } else {
                    "neither"
                }
            ),
        )),
    }
}

fn sg_direction(
    dir: &str,
    peers_key: &str,
    rules: &[SgRuleView<'_>],
    ctx: (&str, &str, &Snapshot),
    out: &mut SgProblems,
) {
    let (me, vpc, snap) = ctx;
    too_many_rules(format!("spec.{dir}"), rules.len(), &mut out.invalid);
    for (i, r) in rules.iter().enumerate() {
        let at = format!("spec.{dir}[{i}]");
        protocol_and_ports(&at, r.protocol, r.ports, &mut out.invalid);
        if r.peers.len() > MAX_PEERS_PER_RULE {
            out.invalid.push(reject(
                &at,
                format!(
                    "holds {} peers in {peers_key}; at most {MAX_PEERS_PER_RULE} per rule: use wider prefixes or a securityGroupRef, or split the rule",
                    r.peers.len()
                ),
            ));
        }
        for (k, p) in r.peers.iter().enumerate() {
            peer(&format!("{at}.{peers_key}[{k}]"), p, me, vpc, snap, out);
        }
    }
}

/// Every problem of SecurityGroup `me`'s rules (POL-02), its peers resolved in `snap`.
pub fn sg_rule_problems(me: &str, spec: &SecurityGroupSpec, snap: &Snapshot) -> SgProblems {
    let mut out = SgProblems::default();
    let ctx = (me, spec.vpc.as_str(), snap);
    if let Some(rules) = &spec.ingress {
        let views: Vec<_> = rules.iter().map(|r| r.view()).collect();
        sg_direction("ingress", "from", &views, ctx, &mut out);
    }
    if let Some(rules) = &spec.egress {
        let views: Vec<_> = rules.iter().map(|r| r.view()).collect();
        sg_direction("egress", "to", &views, ctx, &mut out);
    }
    out
}

fn vpc_exists(kind: &str, vpc: &str, snap: &Snapshot) -> Verdict {
    if vpc.is_empty() {
        return Err(reject(
            "spec.vpc",
            format!("required: every {kind} belongs to exactly one Vpc"),
        ));
    }
    if snap.vpc(vpc).is_none() {
        return Err(reject(
            "spec.vpc",
            format!("Vpc {vpc:?} does not exist; create it first"),
        ));
    }
    Ok(())
}

fn first(problems: Vec<Rejection>) -> Verdict {
    problems.into_iter().next().map_or(Ok(()), Err)
}

pub fn validate_network_acl_create(new: &NetworkACL, snap: &Snapshot) -> Verdict {
    vpc_exists("NetworkACL", &new.spec.vpc, snap)?;
    first(acl_rule_problems(&new.spec))
}

pub fn validate_network_acl_update(old: &NetworkACL, new: &NetworkACL, snap: &Snapshot) -> Verdict {
    if old.spec.vpc != new.spec.vpc {
        return Err(reject(
            "spec.vpc",
            "is immutable: its segments are of that Vpc; create a new NetworkACL in the other Vpc instead",
        ));
    }
    validate_network_acl_create(new, snap)
}

pub fn validate_security_group_create(new: &SecurityGroup, snap: &Snapshot) -> Verdict {
    vpc_exists("SecurityGroup", &new.spec.vpc, snap)?;
    let SgProblems {
        invalid,
        unresolved,
    } = sg_rule_problems(name(new), &new.spec, snap);
    first(invalid)?;
    first(unresolved)
}

/// A group may move to another Vpc only while nothing uses it: its NICs and the groups
/// naming it are of the old one.
pub fn validate_security_group_update(
    old: &SecurityGroup,
    new: &SecurityGroup,
    snap: &Snapshot,
) -> Verdict {
    if old.spec.vpc != new.spec.vpc
        && let Some(users) =
            crate::admission::validate::deletion::security_group_users(name(new), snap)
    {
        return Err(reject(
            "spec.vpc",
            format!(
                "cannot change while {users} use it (they are of Vpc {:?}); create a new SecurityGroup in Vpc {:?} instead",
                old.spec.vpc, new.spec.vpc
            ),
        ));
    }
    validate_security_group_create(new, snap)
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
