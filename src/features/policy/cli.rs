//! `bpf dump policy` and `bpf dump policy_nics`: the NetworkACL and SecurityGroup rule
//! sets as the datapath holds them (`jn_pol_set`, with each set's verdict counters from
//! `jn_pol_stats`), and the SecurityGroups of this Node's NICs (`jn_pol_nic`). Both show
//! the epoch (`jn_pol_epoch`): a connection whose entry carries an older one is judged
//! again at its next packet, so the epoch says whether `conntrack`'s verdicts are
//! current. Read from the pins, never from the daemon (MX-03), so a dump shows what
//! packets are judged by, whatever the daemon believes it wrote.
use std::{fmt::Write, net::Ipv4Addr, path::Path};

use aya::maps::{Array, HashMap, Map, PerCpuArray, PerCpuValues};
use juneau_common::{
    NbrKey, map_names,
    policy::{DIR_OPEN, PolCounters, PolDirection, PolNic, PolSet, SET_ACL, SET_PENDING, SET_SG},
};
use serde::Serialize;

use crate::cli::{CliError, Filter, open};

/// One direction of a rule set and what it decided (summed over CPUs).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct DirectionRow {
    /// The direction allows everything (no rule is looked at).
    pub open: bool,
    pub rules: u32,
    pub allowed: u64,
    pub denied_by_rule: u64,
    pub denied_no_match: u64,
}

/// One rule set of `jn_pol_set`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PolicySetRow {
    pub id: u32,
    /// `acl` (a NetworkACL), `sg` (a SecurityGroup), or the raw kind when neither (0:
    /// a header that denies whatever names it).
    pub kind: String,
    /// `status.rulesetVersion` of the object the set was compiled from.
    pub version: u32,
    /// The slot its trie entries are keyed by (`id * 2` or `id * 2 + 1`).
    pub slot: u32,
    pub ingress: DirectionRow,
    pub egress: DirectionRow,
    pub epoch: u32,
}

/// One NIC of `jn_pol_nic`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PolicyNicRow {
    pub vni: u32,
    pub address: String,
    /// Its groups' rule set ids, `pending` for a group that has no id yet (denied).
    pub groups: Vec<String>,
    pub epoch: u32,
}

/// A set kind as the filter and the rows name it.
pub fn kind_name(kind: u32) -> String {
    match kind {
        SET_ACL => "acl".into(),
        SET_SG => "sg".into(),
        other => other.to_string(),
    }
}

fn direction(d: &PolDirection, c: &PolCounters) -> DirectionRow {
    DirectionRow {
        open: d.flags & DIR_OPEN != 0,
        rules: d.rules,
        allowed: c.allowed,
        denied_by_rule: c.denied_by_rule,
        denied_no_match: c.denied_no_match,
    }
}

/// The row of set `id` (pure, so its rendering is tested without a datapath).
/// `counters` by direction: (ingress, egress).
pub fn set_row(id: u32, set: &PolSet, counters: &[PolCounters; 2], epoch: u32) -> PolicySetRow {
    PolicySetRow {
        id,
        kind: kind_name(set.kind),
        version: set.version,
        slot: set.slot,
        ingress: direction(&set.dirs[0], &counters[0]),
        egress: direction(&set.dirs[1], &counters[1]),
        epoch,
    }
}

/// The row of one NIC (pure).
pub fn nic_row(key: &NbrKey, nic: &PolNic, epoch: u32) -> PolicyNicRow {
    PolicyNicRow {
        vni: key.vni,
        address: Ipv4Addr::from(key.ip.to_ne_bytes()).to_string(),
        groups: nic
            .groups
            .iter()
            .filter(|g| **g != 0)
            .map(|g| {
                if *g == SET_PENDING {
                    "pending".to_owned()
                } else {
                    g.to_string()
                }
            })
            .collect(),
        epoch,
    }
}

/// The epoch the datapath judges by (0 when never bumped).
pub fn dump_epoch(dir: &Path) -> Result<u32, CliError> {
    let name = map_names::POL_EPOCH;
    let epoch: Array<_, u32> = Map::from_map_data(open(dir, name)?)
        .and_then(Array::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    epoch.get(&0, 0).map_err(|e| CliError::Map(name, e))
}

/// Every rule set, by id, narrowed by `set=` and `kind=`.
pub fn dump_policy(dir: &Path, filter: &Filter) -> Result<Vec<PolicySetRow>, CliError> {
    let epoch = dump_epoch(dir)?;
    let name = map_names::POL_SET;
    let sets: HashMap<_, u32, PolSet> = Map::from_map_data(open(dir, name)?)
        .and_then(HashMap::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    let stats_name = map_names::POL_STATS;
    let stats: PerCpuArray<_, PolCounters> = Map::from_map_data(open(dir, stats_name)?)
        .and_then(PerCpuArray::try_from)
        .map_err(|e| CliError::Map(stats_name, e))?;
    let mut rows = Vec::new();
    for item in sets.iter() {
        let (id, set) = item.map_err(|e| CliError::Map(name, e))?;
        if filter.set.is_some_and(|s| s != id) || filter.kind.is_some_and(|k| k != set.kind) {
            continue;
        }
        let mut counters = [PolCounters::default(); 2];
        for (dir, sum) in counters.iter_mut().enumerate() {
            let values: PerCpuValues<PolCounters> = stats
                .get(&(id * 2 + dir as u32), 0)
                .map_err(|e| CliError::Map(stats_name, e))?;
            for v in values.iter() {
                sum.allowed += v.allowed;
                sum.denied_by_rule += v.denied_by_rule;
                sum.denied_no_match += v.denied_no_match;
            }
        }
        rows.push(set_row(id, &set, &counters, epoch));
    }
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// Every NIC with SecurityGroups, by (VNI, address), narrowed by `vni=`, `addr=` and
/// `set=` (the NICs naming that set).
pub fn dump_policy_nics(dir: &Path, filter: &Filter) -> Result<Vec<PolicyNicRow>, CliError> {
    let epoch = dump_epoch(dir)?;
    let name = map_names::POL_NIC;
    let nics: HashMap<_, NbrKey, PolNic> = Map::from_map_data(open(dir, name)?)
        .and_then(HashMap::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    let mut found: Vec<(NbrKey, PolNic)> = nics
        .iter()
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Map(name, e))?;
    found.retain(|(k, n)| {
        filter.admits_network_id(k.vni)
            && filter.admits_addr(Ipv4Addr::from(k.ip.to_ne_bytes()))
            && filter
                .set
                .is_none_or(|s| n.groups.iter().any(|g| *g as u32 == s))
    });
    found.sort_by_key(|(k, _)| (k.vni, u32::from_be(k.ip)));
    Ok(found.iter().map(|(k, n)| nic_row(k, n, epoch)).collect())
}

fn rules(d: &DirectionRow) -> String {
    if d.open {
        "open".into()
    } else {
        d.rules.to_string()
    }
}

/// `ID KIND VERSION SLOT INGRESS EGRESS` (each direction `open` or its rule count),
/// then the counters, each `ingress/egress`.
pub fn policy_table(rows: &[PolicySetRow]) -> String {
    let mut out = format!(
        "{:>5} {:<4} {:>7} {:>5} {:<10} {:<10} {:<13} {:<13} {:<13} EPOCH\n",
        "ID",
        "KIND",
        "VERSION",
        "SLOT",
        "INGRESS",
        "EGRESS",
        "ALLOWED(I/E)",
        "DENIED(I/E)",
        "NOMATCH(I/E)"
    );
    for r in rows {
        let pair = |f: fn(&DirectionRow) -> u64| format!("{}/{}", f(&r.ingress), f(&r.egress));
        let _ = writeln!(
            out,
            "{:>5} {:<4} {:>7} {:>5} {:<10} {:<10} {:<13} {:<13} {:<13} {}",
            r.id,
            r.kind,
            r.version,
            r.slot,
            rules(&r.ingress),
            rules(&r.egress),
            pair(|d| d.allowed),
            pair(|d| d.denied_by_rule),
            pair(|d| d.denied_no_match),
            r.epoch
        );
    }
    out
}

/// `VNI ADDRESS GROUPS EPOCH`.
pub fn policy_nic_table(rows: &[PolicyNicRow]) -> String {
    let mut out = format!("{:>8} {:<16} {:<16} EPOCH\n", "VNI", "ADDRESS", "GROUPS");
    for r in rows {
        let groups = if r.groups.is_empty() {
            "-".to_owned()
        } else {
            r.groups.join(",")
        };
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:<16} {}",
            r.vni, r.address, groups, r.epoch
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use juneau_common::policy::RuleBits;

    use super::*;

    fn acl_set() -> PolSet {
        PolSet {
            kind: SET_ACL,
            version: 4,
            slot: 15,
            pad: 0,
            dirs: [
                PolDirection {
                    rules: 3,
                    allow: RuleBits::default().with(0),
                    ..Default::default()
                },
                PolDirection {
                    flags: DIR_OPEN,
                    ..Default::default()
                },
            ],
        }
    }

    #[test]
    fn pol_03_dump_policy_shows_kind_version_slot_directions_and_counters() {
        let counters = [
            PolCounters {
                allowed: 5,
                denied_by_rule: 2,
                denied_no_match: 1,
            },
            PolCounters {
                allowed: 9,
                ..Default::default()
            },
        ];
        let row = set_row(7, &acl_set(), &counters, 3);
        assert_eq!(row.kind, "acl");
        assert_eq!((row.version, row.slot, row.epoch), (4, 15, 3));
        assert_eq!(
            row.ingress,
            DirectionRow {
                open: false,
                rules: 3,
                allowed: 5,
                denied_by_rule: 2,
                denied_no_match: 1
            }
        );
        assert!(row.egress.open);
        let text = policy_table(&[row]);
        let cols: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            cols,
            ["7", "acl", "4", "15", "3", "open", "5/9", "2/0", "1/0", "3"],
            "{text}"
        );
        assert!(text.starts_with("   ID KIND"), "{text}");
    }

    #[test]
    fn pol_03_dump_policy_names_a_kind_it_does_not_know_by_its_number() {
        let set = PolSet {
            kind: SET_SG,
            ..acl_set()
        };
        assert_eq!(set_row(1, &set, &Default::default(), 0).kind, "sg");
        let none = PolSet {
            kind: 0,
            ..acl_set()
        };
        assert_eq!(set_row(1, &none, &Default::default(), 0).kind, "0");
    }

    #[test]
    fn pol_03_dump_policy_nics_shows_groups_and_pending() {
        let key = NbrKey {
            vni: 21,
            ip: u32::from_ne_bytes([10, 0, 1, 10]),
        };
        let row = nic_row(
            &key,
            &PolNic {
                groups: [12, SET_PENDING],
            },
            2,
        );
        assert_eq!(row.address, "10.0.1.10");
        assert_eq!(row.groups, ["12", "pending"]);
        let one = nic_row(&key, &PolNic { groups: [12, 0] }, 2);
        assert_eq!(one.groups, ["12"], "an empty slot is no group");
        let text = policy_nic_table(&[row, one]);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                ["21", "10.0.1.10", "12,pending", "2"],
                ["21", "10.0.1.10", "12", "2"]
            ]
        );
    }
}
