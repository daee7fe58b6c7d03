//! One NetworkACL or SecurityGroup compiled to what the datapath holds of it
//! (`juneau_common::policy`): per direction, the rules in priority order as bits, the
//! peer prefixes and protocol/port prefixes each bit matches, and the set's header.
//! Pure, so that the map writer, the dumps and `kubectl juneau trace` judge a packet
//! the same way ([`Direction::judge`] is the datapath's verdict written in Rust).
//!
//! What is stored but invalid (admission refuses it; an object can still slip through,
//! or a referenced group go) fails closed: a NetworkACL direction with an invalid rule
//! denies everything (dropping one of its deny rules would let traffic through); a
//! SecurityGroup loses the rule or peer alone (it only ever allows).
use std::collections::BTreeMap;

use ipnet::Ipv4Net;
use juneau_common::policy::{DIR_OPEN, PolDirection, PolSet, RULES_PER_DIRECTION, RuleBits};

use crate::api::{
    networkacl::AclRule,
    policy_rule::{PortSpec, Protocol},
    securitygroup::SgRuleView,
};

/// One rule as the datapath matches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    /// The peer prefixes (any of them); never empty (`0.0.0.0/0` for anywhere).
    pub peers: Vec<Ipv4Net>,
    /// `None`: every protocol.
    pub proto: Option<u8>,
    /// Inclusive ranges; empty: every port of `proto`.
    pub ports: Vec<(u16, u16)>,
    /// What a user knows the rule by, for trace and the dumps (`priority 100`,
    /// `ingress[2]`).
    pub label: String,
}

/// One direction: open (no rule looked at), or its rules in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Direction {
    pub open: bool,
    pub rules: Vec<Rule>,
}

/// What one packet matches in a direction, and how that ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The direction is open.
    Open,
    /// The rule of this rank decided.
    Rule { rank: usize, allow: bool },
    /// No rule matched: denied.
    NoMatch,
}

impl Verdict {
    pub fn allows(&self) -> bool {
        matches!(self, Verdict::Open | Verdict::Rule { allow: true, .. })
    }
}

impl Direction {
    /// The verdict for a packet to or from `peer` (`proto`, destination `port`).
    pub fn judge(&self, peer: std::net::Ipv4Addr, proto: u8, port: u16) -> Verdict {
        if self.open {
            return Verdict::Open;
        }
        self.rules
            .iter()
            .position(|r| {
                r.peers.iter().any(|p| p.contains(&peer))
                    && r.proto.is_none_or(|p| p == proto)
                    && (r.ports.is_empty() || r.ports.iter().any(|&(a, b)| a <= port && port <= b))
            })
            .map(|rank| Verdict::Rule {
                rank,
                allow: self.rules[rank].allow,
            })
            .unwrap_or(Verdict::NoMatch)
    }

    /// The header the datapath holds.
    pub fn header(&self) -> PolDirection {
        let mut d = PolDirection {
            flags: if self.open { DIR_OPEN } else { 0 },
            rules: self.rules.len() as u32,
            ..Default::default()
        };
        for (rank, r) in self.rules.iter().enumerate() {
            if r.allow {
                d.allow = d.allow.with(rank as u32);
            }
            if r.proto.is_none() {
                d.any_protocol = d.any_protocol.with(rank as u32);
            }
        }
        d
    }

    /// `jn_pol_peer`'s entries: every rule's peer prefixes, each with the rules whose
    /// prefixes contain it (so the longest match is exactly the rules that hold the
    /// address).
    pub fn peer_entries(&self) -> BTreeMap<Ipv4Net, RuleBits> {
        let all: Vec<Ipv4Net> = self.rules.iter().flat_map(|r| r.peers.clone()).collect();
        let mut out = BTreeMap::new();
        for p in all {
            let mut bits = RuleBits::default();
            for (rank, r) in self.rules.iter().enumerate() {
                if r.peers.iter().any(|q| q.contains(&p)) {
                    bits = bits.with(rank as u32);
                }
            }
            out.insert(p, bits);
        }
        out
    }

    /// `jn_pol_port`'s entries, by (protocol, port prefix: its first port and length in
    /// bits of 16): each with the rules of that protocol whose ports contain it.
    pub fn port_entries(&self) -> BTreeMap<(u8, u16, u8), RuleBits> {
        let mut keys = Vec::new();
        for r in &self.rules {
            let Some(proto) = r.proto else { continue };
            if r.ports.is_empty() {
                keys.push((proto, 0, 0));
            }
            for &(a, b) in &r.ports {
                keys.extend(range_prefixes(a, b).into_iter().map(|(p, l)| (proto, p, l)));
            }
        }
        let mut out = BTreeMap::new();
        for (proto, start, len) in keys {
            let end = prefix_end(start, len);
            let mut bits = RuleBits::default();
            for (rank, r) in self.rules.iter().enumerate() {
                let holds = r.proto == Some(proto)
                    && (r.ports.is_empty() || r.ports.iter().any(|&(a, b)| a <= start && end <= b));
                if holds {
                    bits = bits.with(rank as u32);
                }
            }
            out.insert((proto, start, len), bits);
        }
        out
    }
}

/// The last port of a prefix.
fn prefix_end(start: u16, len: u8) -> u16 {
    (start as u32 | (0xffff_u32 >> len.min(16))) as u16
}

/// The fewest prefixes (first port, length) that cover `a..=b` exactly (at most 30).
pub fn range_prefixes(a: u16, b: u16) -> Vec<(u16, u8)> {
    let mut out = Vec::new();
    let (mut lo, hi) = (a as u32, b as u32);
    while lo <= hi {
        // The largest aligned block starting at lo that fits.
        let mut size = if lo == 0 {
            1 << 16
        } else {
            1u32 << lo.trailing_zeros()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, (16 - size.trailing_zeros()) as u8));
        lo += size;
    }
    out
}

/// A rule set: a NetworkACL's or a SecurityGroup's two directions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compiled {
    pub kind: u32,
    pub version: u32,
    /// By `DIR_*` (ingress, egress).
    pub dirs: [Direction; 2],
}

impl Compiled {
    pub fn header(&self) -> PolSet {
        PolSet {
            kind: self.kind,
            version: self.version,
            dirs: [self.dirs[0].header(), self.dirs[1].header()],
            ..PolSet::default()
        }
    }
}

/// A rule's protocol (`None`: all) and its port ranges.
type ProtoPorts = (Option<u8>, Vec<(u16, u16)>);

fn proto_and_ports(protocol: &Protocol, ports: &[PortSpec]) -> Result<ProtoPorts, String> {
    let proto = protocol.number()?;
    if !ports.is_empty() && !protocol.has_ports() {
        return Err("ports are only for tcp and udp".into());
    }
    let ranges = ports
        .iter()
        .map(PortSpec::range)
        .collect::<Result<_, _>>()?;
    Ok((proto, ranges))
}

fn cidr(s: &str) -> Result<Ipv4Net, String> {
    if s.is_empty() {
        return Ok(Ipv4Net::default());
    }
    let net: Ipv4Net = s
        .parse()
        .map_err(|_| format!("cidr {s:?} is not an IPv4 prefix"))?;
    Ok(net.trunc())
}

/// A NetworkACL direction: `None` (omitted) is open; otherwise the rules by priority.
/// An invalid rule or more than the bitmap holds: the direction denies everything, and
/// the error says why.
pub fn acl_direction(rules: Option<&[AclRule]>) -> (Direction, Option<String>) {
    let Some(rules) = rules else {
        return (
            Direction {
                open: true,
                rules: Vec::new(),
            },
            None,
        );
    };
    let closed = |why: String| (Direction::default(), Some(why));
    if rules.len() > RULES_PER_DIRECTION as usize {
        return closed(format!(
            "{} rules, at most {RULES_PER_DIRECTION} are held",
            rules.len()
        ));
    }
    let mut sorted: Vec<&AclRule> = rules.iter().collect();
    sorted.sort_by_key(|r| r.priority);
    let mut out = Vec::new();
    for r in sorted {
        let label = format!("priority {}", r.priority);
        let allow = match r.action.as_str() {
            "allow" => true,
            "deny" => false,
            other => return closed(format!("{label}: action {other:?}")),
        };
        let (proto, ports) = match proto_and_ports(&r.protocol, &r.ports) {
            Ok(x) => x,
            Err(e) => return closed(format!("{label}: {e}")),
        };
        let peer = match cidr(&r.cidr) {
            Ok(p) => p,
            Err(e) => return closed(format!("{label}: {e}")),
        };
        out.push(Rule {
            allow,
            peers: vec![peer],
            proto,
            ports,
            label,
        });
    }
    (
        Direction {
            open: false,
            rules: out,
        },
        None,
    )
}

/// A SecurityGroup direction (allow-only, OR-combined). `None`: open when `open_if_omitted`
/// (egress), else denies (ingress). `members` gives a referenced group's addresses; a
/// reference to no group, or a group without members, matches nothing. Problems are
/// returned beside what is kept.
pub fn sg_direction<'a>(
    rules: Option<Vec<SgRuleView<'a>>>,
    open_if_omitted: bool,
    members: &dyn Fn(&str) -> Option<Vec<Ipv4Net>>,
) -> (Direction, Vec<String>) {
    let Some(rules) = rules else {
        return (
            Direction {
                open: open_if_omitted,
                rules: Vec::new(),
            },
            Vec::new(),
        );
    };
    let mut problems = Vec::new();
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let label = format!("rule {i}");
        let (proto, ports) = match proto_and_ports(r.protocol, r.ports) {
            Ok(x) => x,
            Err(e) => {
                problems.push(format!("{label}: {e}; left out"));
                continue;
            }
        };
        let mut peers = Vec::new();
        for p in r.peers {
            match (&p.cidr, &p.security_group_ref) {
                (Some(c), None) => match cidr(c) {
                    Ok(n) => peers.push(n),
                    Err(e) => problems.push(format!("{label}: {e}; peer left out")),
                },
                (None, Some(g)) => match members(&g.name) {
                    Some(m) => peers.extend(m),
                    None => problems.push(format!(
                        "{label}: securityGroupRef {:?} names no SecurityGroup of the Vpc; peer left out",
                        g.name
                    )),
                },
                _ => problems.push(format!(
                    "{label}: a peer needs exactly one of cidr and securityGroupRef; left out"
                )),
            }
        }
        if r.peers.is_empty() {
            peers.push(Ipv4Net::default());
        }
        if peers.is_empty() {
            // Every peer left out, or a group without members yet: matches nothing.
            continue;
        }
        peers.sort();
        peers.dedup();
        out.push(Rule {
            allow: true,
            peers,
            proto,
            ports,
            label,
        });
    }
    if out.len() > RULES_PER_DIRECTION as usize {
        problems.push(format!(
            "{} rules, at most {RULES_PER_DIRECTION} are held; the rest left out",
            out.len()
        ));
        out.truncate(RULES_PER_DIRECTION as usize);
    }
    (
        Direction {
            open: false,
            rules: out,
        },
        problems,
    )
}
