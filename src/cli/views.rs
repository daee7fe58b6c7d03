//! The dumps seed 003's troubleshooting names (EIP-25), as views of the maps Juneau
//! has: the reference keeps one table per question, Juneau answers the same questions
//! from fewer maps, so these views put the rows where the seed's steps look for them.
//! - `arp_table` (`SUBNET_ID IPADDR MAC`): every address a network's packets are sent
//!   to by MAC: the direct ElasticIPs' holders (`jn_eip_direct`, networkID as
//!   subnet id) and the Vpc router's neighbours (`jn_gw_nbr`, `jn_gw_snoop`, by VNI);
//! - `fdb` (`SUBNET_ID MAC IFINDEX VTEP_IP`): the learning table of a segment
//!   (`jn_l2_fdb`) and, for a direct ElasticIP network, each holder as this Node
//!   delivers to it: its veth's ifindex on its own Node, ifindex 0 and its Node's VTEP
//!   elsewhere (`jn_eip_direct`);
//! - `external_address_pools` (`PREFIXLEN ADDR DELIVERY`): what the uplink takes in
//!   for delivery. Juneau's uplink accepts the addresses of `jn_eip_direct`, each a
//!   /32 delivered here (to the holder, or carried to its Node), or dropped when no NIC
//!   holds it (`NO_HOLDER_DROPPED`); then the prefixes of `jn_ext_pools` (EIP-14), the
//!   bgp pools' ranges this Node announces (`..._DELIVERED_HERE`) or only other Nodes
//!   do (`..._DELIVERED_ELSEWHERE`: a direct NIC's packet into one leaves for the
//!   upstream).
use std::{fmt::Write, net::Ipv4Addr, path::Path};

use aya::maps::{LpmTrie, Map};
use juneau_common::{eip::ExtPoolKey, map_names};
use serde::Serialize;

use super::{CliError, Filter, dump_elastic_ips, dump_fdb, dump_gw_neighbours, open};
use crate::node::dataplane::{Delivery, prefix_of};

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ArpTableRow {
    pub node: String,
    pub subnet_id: u32,
    pub ipaddr: String,
    pub mac: String,
    /// `elastic_ip` (a direct holder), `seeded` or `learned` (a router neighbour).
    pub source: String,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FdbViewRow {
    pub node: String,
    pub subnet_id: u32,
    pub mac: String,
    /// The local port (a veth); 0 when the MAC is behind another Node.
    pub ifindex: u32,
    /// That other Node's VTEP; empty for a local port.
    pub vtep_ip: String,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PoolRow {
    pub node: String,
    pub prefixlen: u8,
    pub addr: String,
    pub delivery: String,
}

pub const DELIVERED_HERE: &str = "EXTERNAL_ADDRESS_DELIVERED_HERE";
pub const DELIVERED_ELSEWHERE: &str = "EXTERNAL_ADDRESS_DELIVERED_ELSEWHERE";
/// An allocated ElasticIP no NIC holds: taken in, then dropped (`EIP_NO_HOLDER`).
pub const NO_HOLDER: &str = "NO_HOLDER_DROPPED";

/// An entry written for an allocated ElasticIP that no NIC holds (no MAC, no Node).
fn unheld(e: &super::ElasticIpRow) -> bool {
    e.mac == "00:00:00:00:00:00"
}

/// `arp_table` of `node`: direct holders first, then the router's neighbours.
pub fn dump_arp_table(dir: &Path, node: &str, f: &Filter) -> Result<Vec<ArpTableRow>, CliError> {
    let mut rows: Vec<ArpTableRow> = dump_elastic_ips(dir, node, f)?
        .into_iter()
        .map(|e| ArpTableRow {
            node: node.to_owned(),
            subnet_id: e.network_id,
            source: if unheld(&e) {
                "no_holder"
            } else {
                "elastic_ip"
            }
            .into(),
            ipaddr: e.addr,
            mac: e.mac,
        })
        .collect();
    for n in dump_gw_neighbours(dir)? {
        let ip: Option<Ipv4Addr> = n.address.parse().ok();
        if f.admits_network_id(n.vni) && ip.is_some_and(|a| f.admits_addr(a)) {
            rows.push(ArpTableRow {
                node: node.to_owned(),
                subnet_id: n.vni,
                ipaddr: n.address,
                mac: n.mac,
                source: n.source,
            });
        }
    }
    Ok(rows)
}

/// `fdb` of `node` for `--filter subnet_id=N` (required: one table per segment).
pub fn dump_fdb_view(dir: &Path, node: &str, f: &Filter) -> Result<Vec<FdbViewRow>, CliError> {
    let Some(vni) = f.network_id else {
        return Err(CliError::Usage(
            "fdb holds one table per segment: add --filter subnet_id=<VNI or networkID>".into(),
        ));
    };
    let mut rows: Vec<FdbViewRow> = match dump_fdb(dir, vni) {
        Ok(found) => found
            .into_iter()
            .map(|r| FdbViewRow {
                node: node.to_owned(),
                subnet_id: vni,
                mac: r.mac,
                ifindex: r.ifindex,
                vtep_ip: r.vtep,
            })
            .collect(),
        // A network this Node has no port on: only its direct holders, below.
        Err(CliError::NoSuchVni(_)) => Vec::new(),
        Err(e) => return Err(e),
    };
    let of_network = Filter {
        network_id: Some(vni),
        ..Filter::default()
    };
    for h in dump_elastic_ips(dir, node, &of_network)? {
        if unheld(&h) || rows.iter().any(|r| r.mac == h.mac) {
            continue;
        }
        rows.push(FdbViewRow {
            node: node.to_owned(),
            subnet_id: vni,
            mac: h.mac,
            ifindex: h.ifindex,
            vtep_ip: if h.ifindex == 0 {
                h.vtep
            } else {
                String::new()
            },
        });
    }
    Ok(rows)
}

/// `external_address_pools` of `node`: the direct ElasticIPs' /32s, then the
/// announced prefixes (with `--filter addr=A`, those holding `A`).
pub fn dump_address_pools(dir: &Path, node: &str, f: &Filter) -> Result<Vec<PoolRow>, CliError> {
    let mut rows: Vec<PoolRow> = dump_elastic_ips(dir, node, f)?
        .into_iter()
        .map(|e| PoolRow {
            node: node.to_owned(),
            prefixlen: 32,
            delivery: if unheld(&e) {
                NO_HOLDER
            } else {
                DELIVERED_HERE
            }
            .into(),
            addr: e.addr,
        })
        .collect();
    let name = map_names::EXT_POOLS;
    let map: LpmTrie<_, ExtPoolKey, u32> =
        LpmTrie::try_from(Map::LpmTrie(open(dir, name)?)).map_err(|e| CliError::Map(name, e))?;
    let mut prefixes = Vec::new();
    for item in map.iter() {
        let (k, v) = item.map_err(|e| CliError::Map(name, e))?;
        if let Some(net) = prefix_of(&k).filter(|n| f.addr.is_none_or(|a| n.contains(&a))) {
            prefixes.push((net, v));
        }
    }
    prefixes.sort();
    for (net, v) in prefixes {
        rows.push(PoolRow {
            node: node.to_owned(),
            prefixlen: net.prefix_len(),
            addr: net.network().to_string(),
            delivery: match Delivery::from_raw(v) {
                Some(Delivery::Here) => DELIVERED_HERE.into(),
                Some(Delivery::Elsewhere) => DELIVERED_ELSEWHERE.into(),
                None => format!("UNKNOWN_{v}"),
            },
        });
    }
    Ok(rows)
}

/// Columns as wide as their widest cell plus two spaces, the last one unpadded.
fn table(head: &[&str], rows: Vec<Vec<String>>) -> String {
    let width = |c: usize| {
        rows.iter()
            .map(|r| r[c].len())
            .chain([head[c].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..head.len()).map(width).collect();
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (c, cell) in cells.iter().enumerate() {
            if c + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let _ = write!(out, "{cell:<w$}  ", w = widths[c]);
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(head.to_vec());
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

fn dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { s.into() }
}

/// The seed's `NODE SUBNET_ID IPADDR MAC`, then where the row comes from.
pub fn arp_table(rows: &[ArpTableRow]) -> String {
    table(
        &["NODE", "SUBNET_ID", "IPADDR", "MAC", "SOURCE"],
        rows.iter()
            .map(|r| {
                vec![
                    r.node.clone(),
                    r.subnet_id.to_string(),
                    r.ipaddr.clone(),
                    r.mac.clone(),
                    r.source.clone(),
                ]
            })
            .collect(),
    )
}

pub fn fdb_table(rows: &[FdbViewRow]) -> String {
    table(
        &["NODE", "SUBNET_ID", "MAC", "IFINDEX", "VTEP_IP"],
        rows.iter()
            .map(|r| {
                vec![
                    r.node.clone(),
                    r.subnet_id.to_string(),
                    r.mac.clone(),
                    r.ifindex.to_string(),
                    dash(&r.vtep_ip),
                ]
            })
            .collect(),
    )
}

/// The seed's `NODE PREFIXLEN ADDR DELIVERY`.
pub fn pool_table(rows: &[PoolRow]) -> String {
    table(
        &["NODE", "PREFIXLEN", "ADDR", "DELIVERY"],
        rows.iter()
            .map(|r| {
                vec![
                    r.node.clone(),
                    r.prefixlen.to_string(),
                    r.addr.clone(),
                    r.delivery.clone(),
                ]
            })
            .collect(),
    )
}
