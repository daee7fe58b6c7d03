//! `kubectl juneau bpf dump nat` (NAT-01, NAT-02, NAT-03): the NATGateway mappings this
//! Node holds, read from the one connection table (`jn_ct`): each connection's client
//! (its zone, the Vpc segment's VNI), its server and the address and port it leaves
//! from; then the ports in use per address and protocol, counted from the reply
//! entries that claimed them (`ZONE_HOST`, REPLY|NAT); then the 1:1 mappings of the
//! ElasticIPs attached to Subnet NICs, read from `jn_eip_direct` (stateless: one per
//! address, whatever the connections).
use std::{collections::BTreeMap, fmt::Write as _, net::Ipv4Addr, path::Path};

use aya::maps::{HashMap, Map};
use juneau_common::{
    EipEntry,
    ct::{CT_CLOSED, CT_CLOSING, CT_ESTABLISHED, CT_F_NAT, CT_F_REPLY, CtEntry, CtKey, ZONE_HOST},
    map_names,
};
use serde::Serialize;

use crate::cli::{CliError, Filter, open};

fn ip(raw: u32) -> Ipv4Addr {
    Ipv4Addr::from(raw.to_ne_bytes())
}

/// One translated connection (its original direction).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NatMappingRow {
    pub zone: u32,
    pub protocol: String,
    /// The Pod's address and port (an echo's identifier).
    pub client: String,
    pub server: String,
    /// The Node's address and the port it leaves from.
    pub translated: String,
    pub state: String,
    pub age_seconds: u64,
}

/// Ports of one NAT address in use, per protocol.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NatPortsRow {
    pub address: String,
    pub protocol: String,
    pub ports_in_use: u64,
}

/// An ElasticIP mapped 1:1 onto a Subnet NIC (NAT-03).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct OneToOneRow {
    pub elastic_ip: String,
    /// The Subnet's VNI: the Pod's zone.
    pub zone: u32,
    pub pod_ip: String,
    /// The NIC's Node (its VTEP).
    pub node: String,
    /// The NIC's port when it is on this Node, else 0.
    pub local_port: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NatDump {
    pub mappings: Vec<NatMappingRow>,
    pub ports: Vec<NatPortsRow>,
    pub one_to_one: Vec<OneToOneRow>,
}

/// The 1:1 mappings among `jn_eip_direct`'s entries (a direct holder's and an unheld
/// address's have no Pod address), `filter.addr` matching the ElasticIP or the Pod.
pub fn one_to_one_rows(entries: &[(u32, EipEntry)], filter: &Filter) -> Vec<OneToOneRow> {
    let mut rows: Vec<OneToOneRow> = entries
        .iter()
        .filter(|(eip, e)| {
            e.pod_ip != 0
                && filter
                    .addr
                    .is_none_or(|a| a == ip(*eip) || a == ip(e.pod_ip))
        })
        .map(|(eip, e)| OneToOneRow {
            elastic_ip: ip(*eip).to_string(),
            zone: e.vni,
            pod_ip: ip(e.pod_ip).to_string(),
            node: Ipv4Addr::from(e.vtep).to_string(),
            local_port: e.ifindex,
        })
        .collect();
    rows.sort_by(|a, b| a.elastic_ip.cmp(&b.elastic_ip));
    rows
}

/// What `entries` (the connection table's) say of NAT, `filter.addr` matching the
/// client, the server or the translated address.
pub fn nat_rows(entries: &[(CtKey, CtEntry)], filter: &Filter, now_ns: u64) -> NatDump {
    let mut mappings = Vec::new();
    let mut ports: BTreeMap<(Ipv4Addr, String), u64> = BTreeMap::new();
    for (k, e) in entries {
        if e.flags & CT_F_NAT == 0 {
            continue;
        }
        let reply = e.flags & CT_F_REPLY != 0;
        let proto = crate::cli::output::proto(k.proto);
        if reply && k.zone == ZONE_HOST {
            // The claim: (server, address, server port, NAT port).
            if filter
                .addr
                .is_none_or(|a| a == ip(k.daddr) || a == ip(k.saddr))
            {
                *ports.entry((ip(k.daddr), proto)).or_default() += 1;
            }
            continue;
        }
        if reply {
            continue;
        }
        let touches = [k.saddr, k.daddr, e.nat_ip]
            .iter()
            .any(|r| filter.addr.is_none_or(|a| ip(*r) == a));
        if !touches {
            continue;
        }
        mappings.push(NatMappingRow {
            zone: k.zone,
            protocol: proto,
            client: format!("{}:{}", ip(k.saddr), u16::from_be(k.sport)),
            server: format!("{}:{}", ip(k.daddr), u16::from_be(k.dport)),
            translated: format!("{}:{}", ip(e.nat_ip), u16::from_be(e.nat_port)),
            state: match e.state {
                CT_ESTABLISHED => "established",
                CT_CLOSING => "closing",
                CT_CLOSED => "closed",
                _ => "new",
            }
            .into(),
            age_seconds: now_ns.saturating_sub(e.last_seen_ns) / 1_000_000_000,
        });
    }
    mappings.sort_by(|a, b| (a.zone, &a.client, &a.server).cmp(&(b.zone, &b.client, &b.server)));
    NatDump {
        mappings,
        one_to_one: Vec::new(),
        ports: ports
            .into_iter()
            .map(|((a, p), n)| NatPortsRow {
                address: a.to_string(),
                protocol: p,
                ports_in_use: n,
            })
            .collect(),
    }
}

/// Reads the Node's connection table.
pub fn dump_nat(dir: &Path, filter: &Filter) -> Result<NatDump, CliError> {
    let name = map_names::CT;
    let map: HashMap<_, CtKey, CtEntry> = Map::from_map_data(open(dir, name)?)
        .and_then(HashMap::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    let entries = map
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Map(name, e))?;
    let mut d = nat_rows(
        &entries,
        filter,
        crate::node::dataplane::monotonic_coarse_ns(),
    );
    let name = map_names::EIP_DIRECT;
    let eips: HashMap<_, u32, EipEntry> = Map::from_map_data(open(dir, name)?)
        .and_then(HashMap::try_from)
        .map_err(|e| CliError::Map(name, e))?;
    let eips = eips
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Map(name, e))?;
    d.one_to_one = one_to_one_rows(&eips, filter);
    Ok(d)
}

/// Both tables, as `bpf dump nat` prints them.
pub fn nat_table(d: &NatDump) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>8} {:<5} {:<22} {:<22} {:<22} {:<12} {:>4}",
        "ZONE", "PROTO", "CLIENT", "SERVER", "TRANSLATED", "STATE", "AGE"
    );
    for r in &d.mappings {
        let _ = writeln!(
            s,
            "{:>8} {:<5} {:<22} {:<22} {:<22} {:<12} {:>3}s",
            r.zone, r.protocol, r.client, r.server, r.translated, r.state, r.age_seconds
        );
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:<5} {:>12}",
        "ADDRESS", "PROTO", "PORTS IN USE"
    );
    for p in &d.ports {
        let _ = writeln!(
            s,
            "{:<16} {:<5} {:>12}",
            p.address, p.protocol, p.ports_in_use
        );
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:>8} {:<16} {:<16} {:>10}",
        "ELASTIC_IP", "ZONE", "POD_IP", "NODE", "LOCAL_PORT"
    );
    for o in &d.one_to_one {
        let _ = writeln!(
            s,
            "{:<16} {:>8} {:<16} {:<16} {:>10}",
            o.elastic_ip, o.zone, o.pod_ip, o.node, o.local_port
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be(a: [u8; 4]) -> u32 {
        u32::from_ne_bytes(a)
    }

    #[test]
    fn nat_01_dump_nat_lists_each_mapping_and_the_ports_in_use_per_address() {
        let client = be([10, 50, 0, 2]);
        let server = be([198, 51, 100, 10]);
        let node = be([10, 99, 0, 100]);
        let orig = CtKey::new(4097, client, server, 40000u16.to_be(), 5353u16.to_be(), 17);
        let e = CtEntry {
            flags: CT_F_NAT,
            nat_ip: node,
            nat_port: 40001u16.to_be(),
            state: CT_ESTABLISHED,
            ..Default::default()
        };
        let claim = CtKey::new(
            ZONE_HOST,
            server,
            node,
            5353u16.to_be(),
            40001u16.to_be(),
            17,
        );
        let r = CtEntry {
            flags: CT_F_NAT | CT_F_REPLY,
            nat_ip: client,
            nat_port: 40000u16.to_be(),
            nat_zone: 4097,
            ..Default::default()
        };
        // Neither NAT's: a plain connection is not listed.
        let other = CtKey::new(
            4097,
            client,
            be([10, 50, 0, 3]),
            1u16.to_be(),
            2u16.to_be(),
            6,
        );
        let entries = vec![(orig, e), (claim, r), (other, CtEntry::default())];
        let d = nat_rows(&entries, &Filter::default(), 0);
        assert_eq!(
            d.mappings,
            vec![NatMappingRow {
                zone: 4097,
                protocol: "udp".into(),
                client: "10.50.0.2:40000".into(),
                server: "198.51.100.10:5353".into(),
                translated: "10.99.0.100:40001".into(),
                state: "established".into(),
                age_seconds: 0,
            }]
        );
        assert_eq!(
            d.ports,
            vec![NatPortsRow {
                address: "10.99.0.100".into(),
                protocol: "udp".into(),
                ports_in_use: 1,
            }]
        );
        let elsewhere = Filter {
            addr: Some("192.0.2.1".parse().unwrap()),
            ..Default::default()
        };
        let d = nat_rows(&entries, &elsewhere, 0);
        assert!(d.mappings.is_empty() && d.ports.is_empty());
    }

    #[test]
    fn nat_03_dump_nat_lists_the_one_to_one_mappings() {
        let eip = be([10, 99, 0, 110]);
        let attached = EipEntry {
            vni: 7101,
            vtep: u32::from(Ipv4Addr::new(10, 99, 0, 1)),
            ifindex: 12,
            pod_ip: be([10, 50, 0, 2]),
            ..Default::default()
        };
        // A direct holder's entry is not 1:1.
        let direct = EipEntry {
            vni: 4097,
            ..Default::default()
        };
        let entries = vec![(be([10, 99, 0, 100]), direct), (eip, attached)];
        let rows = one_to_one_rows(&entries, &Filter::default());
        assert_eq!(
            rows,
            vec![OneToOneRow {
                elastic_ip: "10.99.0.110".into(),
                zone: 7101,
                pod_ip: "10.50.0.2".into(),
                node: "10.99.0.1".into(),
                local_port: 12,
            }]
        );
        let table = nat_table(&NatDump {
            mappings: vec![],
            ports: vec![],
            one_to_one: rows,
        });
        assert!(
            table
                .contains("10.99.0.110          7101 10.50.0.2        10.99.0.1                12"),
            "{table}"
        );
        let by_pod = Filter {
            addr: Some("10.50.0.2".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(one_to_one_rows(&entries, &by_pod).len(), 1);
    }
}
