//! `bpf dump` of the Services' maps and the connection table: frontends (`services`),
//! backends (`backends`) and connections (`conntrack`), read from the pins, each
//! narrowed by `--filter addr=<IPv4>`.
use std::{fmt::Write, net::Ipv4Addr, path::Path};

use aya::maps::{Array, HashMap, Map};
use juneau_common::{
    ct::{
        CT_CLOSED, CT_CLOSING, CT_ESTABLISHED, CT_F_AFFINITY, CT_F_REPLY, CT_F_SERVICE, CT_F_SNAT,
        CtEntry, CtKey, ZONE_HOST,
    },
    map_names,
    policy::{POL_F_EGRESS, POL_F_INGRESS},
    svc::{BACKEND_HOST, Backend, SVC_AFFINITY, SvcEntry, SvcKey},
};
use serde::Serialize;

use crate::cli::{CliError, Filter, open, output::proto};

fn ip(raw: u32) -> Ipv4Addr {
    Ipv4Addr::from(raw.to_ne_bytes())
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ServiceRow {
    pub addr: String,
    pub port: u16,
    pub protocol: String,
    pub id: u32,
    pub backends: u32,
    /// `sessionAffinity: ClientIP` timeout, seconds (0: none).
    pub affinity_seconds: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct BackendRow {
    pub id: u32,
    pub addr: String,
    pub port: u16,
    /// `pod` (routed to), or `node` (through the Node's stack from its Service source
    /// address, SVC-02).
    pub via: String,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ConnectionRow {
    /// The VNI of the segment the direction was seen at.
    pub zone: u32,
    pub protocol: String,
    pub src: String,
    pub dst: String,
    /// `original` or `reply`.
    pub direction: String,
    pub state: String,
    /// The backend (original direction) or the ClusterIP restored (reply).
    pub translated: String,
    pub service: u32,
    pub age_seconds: u64,
    /// The sides of the connection this Node's policy allowed, each with the epoch it
    /// was allowed under (`egress@3,ingress@3`; `-`: none). A side whose epoch is not
    /// `jn_pol_epoch`'s is judged again at its next packet (`bpf dump policy`).
    pub policy: String,
}

/// The policy bits of an entry as the `POLICY` column shows them.
pub fn policy_bits(e: &CtEntry) -> String {
    let mut sides = Vec::new();
    if e.policy & POL_F_EGRESS != 0 {
        sides.push(format!("egress@{}", e.policy_version));
    }
    if e.policy & POL_F_INGRESS != 0 {
        sides.push(format!("ingress@{}", e.policy_in_version));
    }
    if sides.is_empty() {
        "-".into()
    } else {
        sides.join(",")
    }
}

pub fn dump_services(dir: &Path, filter: &Filter) -> Result<Vec<ServiceRow>, CliError> {
    let name = map_names::SVC;
    let map: HashMap<_, SvcKey, SvcEntry> = Map::from_map_data(open(dir, name)?)
        .and_then(HashMap::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    let mut rows: Vec<ServiceRow> = map
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Map(name, e))?
        .into_iter()
        .filter(|(k, _)| filter.addr.is_none_or(|a| a == ip(k.ip)))
        .map(|(k, e)| ServiceRow {
            addr: ip(k.ip).to_string(),
            port: u16::from_be(k.port),
            protocol: proto(k.proto),
            id: e.id,
            backends: e.backends,
            affinity_seconds: if e.flags & SVC_AFFINITY != 0 {
                e.affinity_s
            } else {
                0
            },
        })
        .collect();
    rows.sort_by_key(|r| (r.addr.parse::<Ipv4Addr>().ok(), r.port, r.protocol.clone()));
    Ok(rows)
}

pub fn dump_backends(dir: &Path, filter: &Filter) -> Result<Vec<BackendRow>, CliError> {
    let name = map_names::SVC_BACKEND;
    let map: Array<_, Backend> = Map::from_map_data(open(dir, name)?)
        .and_then(Array::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    let mut rows = Vec::new();
    for (id, b) in map.iter().enumerate() {
        let b = b.map_err(|e| CliError::Map(name, e))?;
        if b.ip == 0 || filter.addr.is_some_and(|a| a != ip(b.ip)) {
            continue;
        }
        rows.push(BackendRow {
            id: id as u32,
            addr: ip(b.ip).to_string(),
            port: u16::from_be(b.port),
            via: if b.flags & BACKEND_HOST != 0 {
                "node"
            } else {
                "pod"
            }
            .into(),
        });
    }
    Ok(rows)
}

pub fn dump_conntrack(dir: &Path, filter: &Filter) -> Result<Vec<ConnectionRow>, CliError> {
    let name = map_names::CT;
    let map: HashMap<_, CtKey, CtEntry> = Map::from_map_data(open(dir, name)?)
        .and_then(HashMap::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    let now = crate::node::dataplane::monotonic_coarse_ns();
    let mut rows: Vec<(CtKey, ConnectionRow)> = Vec::new();
    for entry in map.iter() {
        let (k, e) = entry.map_err(|e| CliError::Map(name, e))?;
        let reply = e.flags & CT_F_REPLY != 0;
        let nat = format!("{}:{}", ip(e.nat_ip), u16::from_be(e.nat_port));
        let snat = e.flags & CT_F_SNAT != 0;
        let translated = if e.flags & CT_F_SERVICE == 0 {
            String::new()
        } else if reply && k.zone == ZONE_HOST {
            // The stack's reply to the source address: given back to the client.
            format!("to {nat} (zone {})", e.nat_zone)
        } else if reply {
            format!("{}:{}", ip(e.service_ip), u16::from_be(e.service_port))
        } else if snat {
            format!(
                "{}:{} from {nat}",
                ip(e.backend_ip),
                u16::from_be(e.backend_port)
            )
        } else {
            format!("{}:{}", ip(e.backend_ip), u16::from_be(e.backend_port))
        };
        // A NATGateway entry keeps its cached hop in the Service fields
        // (`ct::NatHop`): they are a Service's only under `CT_F_SERVICE`.
        let service = e.flags & CT_F_SERVICE != 0;
        let (backend_ip, service_ip) = if service {
            (e.backend_ip, e.service_ip)
        } else {
            (0, 0)
        };
        let touches = |a: Ipv4Addr| {
            [k.saddr, k.daddr, backend_ip, service_ip]
                .iter()
                .any(|r| *r != 0 && ip(*r) == a)
        };
        if filter.addr.is_some_and(|a| !touches(a)) {
            continue;
        }
        rows.push((
            k,
            ConnectionRow {
                zone: k.zone,
                protocol: proto(k.proto),
                src: format!("{}:{}", ip(k.saddr), u16::from_be(k.sport)),
                dst: format!("{}:{}", ip(k.daddr), u16::from_be(k.dport)),
                direction: if reply { "reply" } else { "original" }.into(),
                state: match e.state {
                    CT_ESTABLISHED => "established",
                    CT_CLOSING => "closing",
                    CT_CLOSED => "closed",
                    _ => "new",
                }
                .into(),
                translated: if e.flags & CT_F_AFFINITY != 0 && !reply {
                    format!("{translated} (affinity)")
                } else {
                    translated
                },
                service: if service { e.service } else { 0 },
                age_seconds: now.saturating_sub(e.last_seen_ns) / 1_000_000_000,
                policy: policy_bits(&e),
            },
        ));
    }
    rows.sort_by_key(|(k, _)| *k);
    Ok(rows.into_iter().map(|(_, r)| r).collect())
}

pub fn service_table(rows: &[ServiceRow]) -> String {
    let mut out = format!(
        "{:<16} {:>5} {:<5} {:>5} {:>8} AFFINITY\n",
        "ADDR", "PORT", "PROTO", "ID", "BACKENDS"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<16} {:>5} {:<5} {:>5} {:>8} {}",
            r.addr,
            r.port,
            r.protocol,
            r.id,
            r.backends,
            if r.affinity_seconds == 0 {
                "-".to_string()
            } else {
                format!("{}s", r.affinity_seconds)
            }
        );
    }
    out
}

pub fn backend_table(rows: &[BackendRow]) -> String {
    let mut out = format!("{:>7} {:<16} {:>5} VIA\n", "ID", "ADDR", "PORT");
    for r in rows {
        let _ = writeln!(out, "{:>7} {:<16} {:>5} {}", r.id, r.addr, r.port, r.via);
    }
    out
}

pub fn connection_table(rows: &[ConnectionRow]) -> String {
    let mut out = format!(
        "{:>8} {:<5} {:<22} {:<22} {:<8} {:<11} {:<22} {:>5} {:>7} POLICY\n",
        "ZONE", "PROTO", "SRC", "DST", "DIR", "STATE", "TRANSLATED", "SVC", "AGE"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:>8} {:<5} {:<22} {:<22} {:<8} {:<11} {:<22} {:>5} {:>7} {}",
            r.zone,
            r.protocol,
            r.src,
            r.dst,
            r.direction,
            r.state,
            if r.translated.is_empty() {
                "-"
            } else {
                &r.translated
            },
            r.service,
            format!("{}s", r.age_seconds),
            r.policy
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pol_03_dump_conntrack_shows_the_policy_bits_and_epochs() {
        let mut e = CtEntry::default();
        assert_eq!(policy_bits(&e), "-");
        e.policy = POL_F_EGRESS;
        e.policy_version = 3;
        assert_eq!(policy_bits(&e), "egress@3");
        e.policy |= POL_F_INGRESS;
        e.policy_in_version = 4;
        assert_eq!(policy_bits(&e), "egress@3,ingress@4");
        let row = ConnectionRow {
            zone: 21,
            protocol: "tcp".into(),
            src: "10.0.1.10:40000".into(),
            dst: "10.0.2.12:80".into(),
            direction: "original".into(),
            state: "new".into(),
            translated: String::new(),
            service: 0,
            age_seconds: 2,
            policy: policy_bits(&e),
        };
        let text = connection_table(&[row]);
        let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
        let cols: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(header.last(), Some(&"POLICY"), "{text}");
        assert_eq!(
            cols,
            [
                "21",
                "tcp",
                "10.0.1.10:40000",
                "10.0.2.12:80",
                "original",
                "new",
                "-",
                "0",
                "2s",
                "egress@3,ingress@4"
            ],
            "{text}"
        );
    }
}
