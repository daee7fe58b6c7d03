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
//!   for delivery. Juneau's uplink accepts exactly the addresses of `jn_eip_direct`,
//!   each a /32 delivered here (to the holder, or carried to its Node), or dropped when
//!   no NIC holds it (`NO_HOLDER_DROPPED`); pools announced
//!   by other Nodes (`..._DELIVERED_ELSEWHERE`) come with BGP, which is not built yet.
use std::{fmt::Write, net::Ipv4Addr, path::Path};

use serde::Serialize;

use super::{CliError, Filter, dump_elastic_ips, dump_fdb, dump_gw_neighbours};

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

/// `external_address_pools` of `node`.
pub fn dump_address_pools(dir: &Path, node: &str, f: &Filter) -> Result<Vec<PoolRow>, CliError> {
    Ok(dump_elastic_ips(dir, node, f)?
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
        .collect())
}

fn dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

/// The seed's `NODE SUBNET_ID IPADDR MAC`, then where the row comes from.
pub fn arp_table(rows: &[ArpTableRow]) -> String {
    let w = rows.iter().map(|r| r.node.len()).max().unwrap_or(0).max(8);
    let mut out = format!(
        "{:<w$}  {:<10} {:<15} {:<18} SOURCE\n",
        "NODE", "SUBNET_ID", "IPADDR", "MAC"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<w$}  {:<10} {:<15} {:<18} {}",
            r.node, r.subnet_id, r.ipaddr, r.mac, r.source
        );
    }
    out
}

pub fn fdb_table(rows: &[FdbViewRow]) -> String {
    let w = rows.iter().map(|r| r.node.len()).max().unwrap_or(0).max(8);
    let mut out = format!(
        "{:<w$}  {:<10} {:<18} {:<8} VTEP_IP\n",
        "NODE", "SUBNET_ID", "MAC", "IFINDEX"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<w$}  {:<10} {:<18} {:<8} {}",
            r.node,
            r.subnet_id,
            r.mac,
            r.ifindex,
            dash(&r.vtep_ip)
        );
    }
    out
}

/// The seed's `NODE PREFIXLEN ADDR DELIVERY`.
pub fn pool_table(rows: &[PoolRow]) -> String {
    let w = rows.iter().map(|r| r.node.len()).max().unwrap_or(0).max(8);
    let mut out = format!(
        "{:<w$}  {:<10} {:<13} DELIVERY\n",
        "NODE", "PREFIXLEN", "ADDR"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<w$}  {:<10} {:<13} {}",
            r.node, r.prefixlen, r.addr, r.delivery
        );
    }
    out
}
