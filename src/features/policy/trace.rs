//! What `kubectl juneau trace` says of NetworkACLs and SecurityGroups (POL-03): each
//! rule set a packet meets, in the datapath's order (source ACL egress, source SG
//! egress, destination ACL ingress, destination SG ingress), its verdict and the rule
//! that decided. Judged by the daemon's own compiler (`node::policy::compile_acl`,
//! `compile_sg`, `Direction::judge`) on the cluster's objects: the code the maps are
//! built from, so the trace and the datapath cannot disagree about a rule.
//!
//! Where each applies, as the datapath decides it (`ebpf/.../policy`): the sender's side
//! at its router (a Subnet NIC's packets always pass it, a gateway L2Network NIC's only
//! when they leave the segment), the receiver's at delivery; a segment's NetworkACL only
//! on what crosses its gateway (source and destination in different segments: a
//! Subnet's own prefix is not crossing); a Subnet NIC's SecurityGroups always, a gateway
//! L2Network NIC's only across the gateway. A set without an id yet (pending) denies.
use std::net::Ipv4Addr;

use juneau_common::{
    DropReason,
    policy::{DIR_EGRESS, DIR_INGRESS, SET_PENDING},
};

use crate::cli::CliError;
use crate::{
    api::{NetworkInterface, policy_rule::PROTOCOL_NAMES},
    cluster::World,
    features::policy::node::{self as policy, Direction, Verdict},
};

/// The protocol and destination port a trace judges rules by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub proto: u8,
    /// `None`: not given (a rule set whose rules may look at ports is then not judged).
    pub port: Option<u16>,
}

impl Default for Flow {
    /// TCP, as the Service trace defaults to.
    fn default() -> Self {
        Self {
            proto: 6,
            port: None,
        }
    }
}

/// Splits a trace target `<what>[:<port>][/<proto>]` (`web:80`, `10.1.0.3:53/udp`,
/// `web/icmp`): what it names and the flow; TCP unless a protocol is given.
pub fn split_target(to: &str) -> Result<(&str, Flow), CliError> {
    let bad = |why: &str| CliError::Usage(format!("{to:?}: {why}"));
    let (rest, proto) = match to.split_once('/') {
        Some((r, p)) => {
            let p = p.to_lowercase();
            let n = PROTOCOL_NAMES
                .iter()
                .find(|(name, _)| *name == p)
                .map(|(_, n)| *n)
                .or_else(|| p.parse().ok())
                .ok_or_else(|| bad("the protocol is a name (tcp, udp, icmp, ...) or a number"))?;
            (r, n)
        }
        None => (to, 6),
    };
    let (what, port) = match rest.rsplit_once(':') {
        Some((w, p)) => (w, Some(p.parse().map_err(|_| bad("the port is a number"))?)),
        None => (rest, None),
    };
    Ok((what, Flow { proto, port }))
}

/// Which side of the connection a step is decided on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// The sender's Node (its router).
    Source,
    /// The receiver's Node (delivery).
    Destination,
}

/// The policy a packet meets: the steps, and the drop that ends it (`None`: allowed,
/// or nothing judged).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Judgement {
    pub steps: Vec<(At, String)>,
    pub dropped: Option<&'static str>,
}

/// The hop that ends a denied trace: where the drop is counted.
pub fn drop_line(reason: &str) -> String {
    format!("dropped: {reason} (counted in bpf dump drops, and by its rule set in bpf dump policy)")
}

/// A NIC's segment as policy sees it: its NetworkACL's name, whether it is a Subnet,
/// whether it has a gateway.
struct Segment {
    acl: Option<String>,
    subnet: bool,
    gateway: bool,
}

fn segment(world: &World, nic: &NetworkInterface) -> Segment {
    let o = &world.objects;
    if let Some(s) = nic.spec.subnet.as_deref() {
        return Segment {
            acl: o.subnet(s).and_then(|s| s.spec.network_acl.clone()),
            subnet: true,
            gateway: true,
        };
    }
    let l2 = nic.spec.l2_network.as_deref().and_then(|n| o.l2network(n));
    Segment {
        acl: l2.and_then(|n| n.spec.network_acl.clone()),
        subnet: false,
        gateway: l2.is_some_and(|n| n.spec.gateway.is_some()),
    }
}

fn ip_of(nic: &NetworkInterface) -> Option<Ipv4Addr> {
    nic.ip()
}

fn vni_of(nic: &NetworkInterface) -> u32 {
    nic.status.as_ref().map_or(0, |s| s.vni)
}

fn name<T: kube::Resource>(o: &T) -> &str {
    o.meta().name.as_deref().unwrap_or_default()
}

/// The NIC of segment `vni` whose address is `ip` (a trace's source, a Service's
/// backend): segments never overlap, so at most one.
pub fn nic_at(world: &World, vni: u32, ip: Ipv4Addr) -> Option<&NetworkInterface> {
    world
        .objects
        .interfaces
        .iter()
        .find(|n| vni_of(n) == vni && ip_of(n) == Some(ip))
}

/// The NIC of Vpc `vpc` whose address is `ip`.
pub fn nic_in_vpc<'w>(world: &'w World, vpc: &str, ip: Ipv4Addr) -> Option<&'w NetworkInterface> {
    let o = &world.objects;
    world.objects.interfaces.iter().find(|n| {
        ip_of(n) == Some(ip)
            && match (&n.spec.subnet, &n.spec.l2_network) {
                (Some(s), _) => o.subnet(s).is_some_and(|s| s.spec.vpc == vpc),
                (None, Some(l)) => o.l2network(l).is_some_and(|l| l.spec.vpc == vpc),
                _ => false,
            }
    })
}

/// How one rule set ends for the packet.
enum Outcome {
    Allowed,
    Denied,
    /// No id yet, or its object is gone: `POLICY_SET_MISSING`.
    Missing,
    /// Not judged (no port given).
    Unjudged,
}

fn verdict_text(d: &Direction, v: &Verdict) -> String {
    match v {
        Verdict::Open => "allowed: the direction is open (omitted)".into(),
        Verdict::Rule { rank, allow } => format!(
            "{} by {}",
            if *allow { "allowed" } else { "denied" },
            d.rules[*rank].label
        ),
        Verdict::NoMatch => "denied: no rule matched".into(),
    }
}

/// One direction's verdict and its text.
fn judge_dir(d: &Direction, peer: Ipv4Addr, flow: Flow) -> (Outcome, String) {
    let needs_port = matches!(flow.proto, 6 | 17 | 132);
    let port = match flow.port {
        Some(p) => p,
        None if !needs_port || d.open => 0,
        None => {
            return (
                Outcome::Unjudged,
                "not judged: name the destination's port (<to>:<port>[/proto])".into(),
            );
        }
    };
    let v = d.judge(peer, flow.proto, port);
    let text = verdict_text(d, &v);
    (
        if v.allows() {
            Outcome::Allowed
        } else {
            Outcome::Denied
        },
        text,
    )
}

/// The segment ACL step of one side: its text and outcome.
fn acl_step(world: &World, acl: &str, dir: u8, peer: Ipv4Addr, flow: Flow) -> (Outcome, String) {
    let id = world.objects.acl_set(Some(acl));
    let found = world.objects.network_acls.iter().find(|a| name(*a) == acl);
    match found {
        Some(a) if id != SET_PENDING as u32 => {
            let (set, _) = policy::compile_acl(a);
            let (o, text) = judge_dir(&set.dirs[dir as usize], peer, flow);
            (o, format!("(NetworkACL {acl}, set {id}): {text}"))
        }
        _ => (
            Outcome::Missing,
            format!("(NetworkACL {acl}, pending): denied: the rule set has no id yet"),
        ),
    }
}

/// The SecurityGroup steps of one side, in the NIC's order: any allowing allows (the
/// datapath stops there); a pending group met before one that allows denies.
fn sg_steps(
    world: &World,
    groups: &[String],
    dir: u8,
    peer: Ipv4Addr,
    flow: Flow,
) -> (Outcome, Vec<String>) {
    let all = &world.objects.security_groups;
    let mut lines = Vec::new();
    let mut unjudged = false;
    for g in groups.iter().take(2) {
        let found = all.iter().find(|s| name(*s) == g.as_str());
        let id = found
            .and_then(|s| s.status.as_ref())
            .map(|s| s.group_id)
            .filter(|id| *id != 0 && *id < SET_PENDING as u32);
        let (Some(sg), Some(id)) = (found, id) else {
            lines.push(format!(
                "(SecurityGroup {g}, pending): denied: the rule set has no id yet"
            ));
            return (Outcome::Missing, lines);
        };
        let (set, _) = policy::compile_sg(sg, all);
        let (o, text) = judge_dir(&set.dirs[dir as usize], peer, flow);
        lines.push(format!("(SecurityGroup {g}, set {id}): {text}"));
        match o {
            Outcome::Allowed => return (Outcome::Allowed, lines),
            Outcome::Unjudged => unjudged = true,
            Outcome::Denied | Outcome::Missing => {}
        }
    }
    (
        if unjudged {
            Outcome::Unjudged
        } else {
            Outcome::Denied
        },
        lines,
    )
}

/// The drop an outcome ends the packet with (`drop`: the step's own denial).
fn ended(o: Outcome, drop: DropReason) -> Option<&'static str> {
    match o {
        Outcome::Denied => Some(drop.name()),
        Outcome::Missing => Some(DropReason::PolicySetMissing.name()),
        Outcome::Allowed | Outcome::Unjudged => None,
    }
}

/// One side of a connection as policy judges it.
struct Side<'a> {
    at: At,
    who: &'static str,
    dir: u8,
    /// The other end: the destination leaving, the source arriving.
    peer: Ipv4Addr,
    /// The side's segment ACL applies (the packet crosses the gateway here).
    acl_here: bool,
    /// The NIC's SecurityGroups apply.
    sg_here: bool,
    seg: &'a Segment,
    nic: &'a NetworkInterface,
    acl_drop: DropReason,
    sg_drop: DropReason,
}

/// The policy a packet from `src` to `dst` meets (`dst`: for a Service, the backend's
/// NIC: the datapath judges the translated destination).
pub fn judge(
    world: &World,
    src: &NetworkInterface,
    dst: &NetworkInterface,
    flow: Flow,
) -> Judgement {
    let mut out = Judgement::default();
    let (Some(s_ip), Some(d_ip)) = (ip_of(src), ip_of(dst)) else {
        return out;
    };
    let crossing = vni_of(src) != vni_of(dst);
    let (s_seg, d_seg) = (segment(world, src), segment(world, dst));
    // A gateway L2Network's packets meet the router only when they leave the segment.
    let through_router = s_seg.subnet || (s_seg.gateway && crossing);
    let sides = [
        Side {
            at: At::Source,
            who: "source",
            dir: DIR_EGRESS,
            peer: d_ip,
            acl_here: crossing && through_router,
            sg_here: through_router,
            seg: &s_seg,
            nic: src,
            acl_drop: DropReason::PolicyAclEgress,
            sg_drop: DropReason::PolicySgEgress,
        },
        Side {
            at: At::Destination,
            who: "destination",
            dir: DIR_INGRESS,
            peer: s_ip,
            acl_here: crossing,
            sg_here: d_seg.subnet || (d_seg.gateway && crossing),
            seg: &d_seg,
            nic: dst,
            acl_drop: DropReason::PolicyAclIngress,
            sg_drop: DropReason::PolicySgIngress,
        },
    ];
    let mut judged = false;
    for side in &sides {
        let dir_name = if side.dir == DIR_EGRESS {
            "egress"
        } else {
            "ingress"
        };
        let mut step = |what: &str, text: String| {
            out.steps
                .push((side.at, format!("{} {what} {dir_name} {text}", side.who)));
        };
        if let Some(acl) = side.seg.acl.as_deref().filter(|_| side.acl_here) {
            judged = true;
            let (o, text) = acl_step(world, acl, side.dir, side.peer, flow);
            step("ACL", text);
            if let Some(d) = ended(o, side.acl_drop) {
                out.dropped = Some(d);
                return out;
            }
        }
        let groups = &side.nic.spec.security_groups;
        if side.sg_here && !groups.is_empty() {
            judged = true;
            let (o, lines) = sg_steps(world, groups, side.dir, side.peer, flow);
            for l in lines {
                step("SG", l);
            }
            if let Some(d) = ended(o, side.sg_drop) {
                out.dropped = Some(d);
                return out;
            }
        }
    }
    if judged {
        out.steps.push((
            At::Destination,
            "stateful: the connection's entry in jn_ct lets its replies through every hook".into(),
        ));
    }
    out
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
