//! `bpf dump` of what a Node holds for ElasticIPs carried directly by Pod NICs (EIP-25,
//! seed 003's troubleshooting): every direct ElasticIP and its holder
//! (`elastic_ip_direct`, from `jn_eip_direct`), the addresses this Node answers ARP for
//! (`external_arp_table`, from `jn_ext_arp`), and the direct NICs' ports on this Node
//! (`ifindex_external_network` and `ifindex_host_mac`, both from `jn_l2_port`, where a
//! direct NIC's port carries `PORT_EIP`). Read from the pins, so they show what the
//! datapath uses, not what the daemon meant to write.
use std::{fmt::Write, net::Ipv4Addr, path::Path};

use aya::maps::{Array, HashMap, Map, MapError};
use juneau_common::{
    EipEntry, ExtArp, PortConfig,
    l2::MAX_PORTS,
    map_names,
    port::{PORT_ACTIVE, PORT_EIP},
};
use serde::Serialize;

use crate::cli::{CliError, Filter, open};

/// An address as the maps key it (network order, as in packets).
fn key_ip(raw: u32) -> Ipv4Addr {
    Ipv4Addr::from(raw.to_ne_bytes())
}

/// One direct ElasticIP as a Node's datapath knows it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ElasticIpRow {
    /// The Node whose map this is (every Node holds every direct ElasticIP).
    pub node: String,
    pub addr: String,
    /// The ExternalNetwork's networkID: the VNI packets to the holder are carried with.
    pub network_id: u32,
    /// The holder NIC's MAC (its NetworkEndpoint's `spec.macAddress`).
    pub mac: String,
    /// The holder's Node, as its VTEP.
    pub vtep: String,
    /// On the holder's Node, its port (the veth the datapath delivers to); 0 elsewhere.
    pub ifindex: u32,
}

/// An address this Node answers ARP for, and the MAC it answers with (its uplink's).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ArpAnswerRow {
    pub addr: String,
    pub mac: String,
}

/// A direct NIC's port on this Node: its host veth.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct EipPortRow {
    pub ifindex: u32,
    pub network_id: u32,
    /// The ElasticIP, the only source the NIC may send from.
    pub ipv4: String,
    /// What 169.254.0.1 resolves to inside the Pod (the network's gateway MAC).
    pub host_mac: String,
}

/// The `ifindex_host_mac` view of [`EipPortRow`] (seed 003 compares it with the Pod's
/// `ip neigh show 169.254.0.1`).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct HostMacRow {
    pub ifindex: u32,
    pub host_mac: String,
}

/// `jn_eip_direct` of `node`, by address.
pub fn dump_elastic_ips(
    dir: &Path,
    node: &str,
    filter: &Filter,
) -> Result<Vec<ElasticIpRow>, CliError> {
    let name = map_names::EIP_DIRECT;
    let map: HashMap<_, u32, EipEntry> =
        HashMap::try_from(Map::HashMap(open(dir, name)?)).map_err(|e| CliError::Map(name, e))?;
    let mut found: Vec<(Ipv4Addr, EipEntry)> = map
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Map(name, e))?
        .into_iter()
        .map(|(k, e)| (key_ip(k), e))
        .filter(|(a, e)| filter.admits_addr(*a) && filter.admits_network_id(e.vni))
        .collect();
    found.sort_by_key(|(a, _)| *a);
    Ok(found
        .into_iter()
        .map(|(a, e)| ElasticIpRow {
            node: node.to_owned(),
            addr: a.to_string(),
            network_id: e.vni,
            mac: crate::format_mac(&e.pod_mac.mac),
            vtep: Ipv4Addr::from(e.vtep).to_string(),
            ifindex: e.ifindex,
        })
        .collect())
}

/// `jn_ext_arp`, by address.
pub fn dump_arp_answers(dir: &Path, filter: &Filter) -> Result<Vec<ArpAnswerRow>, CliError> {
    let name = map_names::EXT_ARP;
    let map: HashMap<_, u32, ExtArp> =
        HashMap::try_from(Map::HashMap(open(dir, name)?)).map_err(|e| CliError::Map(name, e))?;
    let mut found: Vec<(Ipv4Addr, ExtArp)> = map
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Map(name, e))?
        .into_iter()
        .map(|(k, v)| (key_ip(k), v))
        .filter(|(a, _)| filter.admits_addr(*a))
        .collect();
    found.sort_by_key(|(a, _)| *a);
    Ok(found
        .into_iter()
        .map(|(a, v)| ArpAnswerRow {
            addr: a.to_string(),
            mac: crate::format_mac(&v.mac.mac),
        })
        .collect())
}

/// The active `PORT_EIP` ports of `jn_l2_port`. With `--filter ifindex=N` only that
/// slot is read; otherwise the whole array (an array holds every slot, so there is
/// nothing smaller to walk).
pub fn dump_eip_ports(dir: &Path, filter: &Filter) -> Result<Vec<EipPortRow>, CliError> {
    let name = map_names::L2_PORT;
    let ports: Array<_, PortConfig> =
        Array::try_from(Map::Array(open(dir, name)?)).map_err(|e| CliError::Map(name, e))?;
    let slots: Vec<(u32, PortConfig)> = match filter.ifindex {
        // Beyond the array no interface can be a port: nothing to show.
        Some(i) if i >= MAX_PORTS => Vec::new(),
        Some(i) => match ports.get(&i, 0) {
            Ok(p) => vec![(i, p)],
            Err(MapError::OutOfBounds { .. }) => Vec::new(),
            Err(e) => return Err(CliError::Map(name, e)),
        },
        None => (0..)
            .zip(ports.iter())
            .map(|(i, p)| p.map(|p| (i, p)).map_err(|e| CliError::Map(name, e)))
            .collect::<Result<_, _>>()?,
    };
    Ok(slots
        .into_iter()
        .filter(|(_, p)| p.flags & (PORT_ACTIVE | PORT_EIP) == PORT_ACTIVE | PORT_EIP)
        .filter(|(_, p)| filter.admits_network_id(p.vni))
        .map(|(ifindex, p)| EipPortRow {
            ifindex,
            network_id: p.vni,
            ipv4: key_ip(p.own_ip).to_string(),
            host_mac: crate::format_mac(&p.gw_mac.mac),
        })
        .collect())
}

/// The `ifindex_host_mac` view of the direct NICs' ports.
pub fn host_macs(rows: &[EipPortRow]) -> Vec<HostMacRow> {
    rows.iter()
        .map(|r| HostMacRow {
            ifindex: r.ifindex,
            host_mac: r.host_mac.clone(),
        })
        .collect()
}

/// The table of `elastic_ip_direct`: the seed's `NODE ADDR NETWORK_ID`, then the
/// holder's MAC and VTEP (what tells a Node that carries the packet where to).
pub fn elastic_ip_table(rows: &[ElasticIpRow]) -> String {
    let w = rows.iter().map(|r| r.node.len()).max().unwrap_or(0).max(8);
    let mut out = format!(
        "{:<w$}  {:<13} {:<11} {:<18} VTEP\n",
        "NODE", "ADDR", "NETWORK_ID", "MAC"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<w$}  {:<13} {:<11} {:<18} {}",
            r.node, r.addr, r.network_id, r.mac, r.vtep
        );
    }
    out
}

/// The table of `external_arp_table`.
pub fn arp_answer_table(rows: &[ArpAnswerRow]) -> String {
    let mut out = format!("{:<15} MAC\n", "ADDR");
    for r in rows {
        let _ = writeln!(out, "{:<15} {}", r.addr, r.mac);
    }
    out
}

/// The table of `ifindex_external_network`: the seed's `IFINDEX NETWORK_ID IPV4` (no
/// NODE column: one Node's ports), then `HOST_MAC`.
pub fn eip_port_table(rows: &[EipPortRow]) -> String {
    let mut out = format!(
        "{:<8} {:<11} {:<15} HOST_MAC\n",
        "IFINDEX", "NETWORK_ID", "IPV4"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<8} {:<11} {:<15} {}",
            r.ifindex, r.network_id, r.ipv4, r.host_mac
        );
    }
    out
}

/// The table of `ifindex_host_mac`.
pub fn host_mac_table(rows: &[HostMacRow]) -> String {
    let mut out = format!("{:<8} HOST_MAC\n", "IFINDEX");
    for r in rows {
        let _ = writeln!(out, "{:<8} {}", r.ifindex, r.host_mac);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_line_up_as_the_seed_shows_them() {
        let eips = elastic_ip_table(&[ElasticIpRow {
            node: "worker-1".into(),
            addr: "10.225.51.8".into(),
            network_id: 4097,
            mac: "02:00:00:00:00:01".into(),
            vtep: "10.0.0.2".into(),
            ifindex: 0,
        }]);
        let mut lines = eips.lines();
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("NODE      ADDR          NETWORK_ID"),
            "{eips}"
        );
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("worker-1  10.225.51.8   4097"),
            "{eips}"
        );
        let ports = eip_port_table(&[EipPortRow {
            ifindex: 23,
            network_id: 4097,
            ipv4: "10.225.51.8".into(),
            host_mac: "02:6a:00:00:10:01".into(),
        }]);
        let mut lines = ports.lines();
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("IFINDEX  NETWORK_ID  IPV4"),
            "{ports}"
        );
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("23       4097        10.225.51.8"),
            "{ports}"
        );
    }
}
