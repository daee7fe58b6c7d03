//! `bpf dump` of the router's maps: gateway segments, the routes of each table,
//! neighbours, and the router's counters, read from the pins.
use std::{net::Ipv4Addr, path::Path};

use aya::maps::{ArrayOfMaps, HashMap, LpmTrie, Map, MapData, lpm_trie::Key};
use juneau_common::{
    GwSegment, NbrEntry, NbrKey, RouteEntry,
    gw::{
        GwStat, NBR_SEEDED, ROUTE_CONNECTED, ROUTE_ENDPOINT, ROUTE_INTERNET_GW, ROUTE_NAT_GW,
        ROUTE_NO_NEXT_HOP, ROUTE_NO_SERVICES, ROUTE_UNREACHABLE,
    },
    map_names,
};
use serde::Serialize;

use crate::cli::{CliError, open};

fn raw_ip(raw: u32) -> String {
    Ipv4Addr::from(raw.to_ne_bytes()).to_string()
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct GwSegmentRow {
    pub vni: u32,
    pub gateway: String,
    pub gateway_mac: String,
    pub mtu: u32,
    /// The local slot of its RouteTable (the `TABLE` of `gw_routes`).
    pub table: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RouteRow {
    pub table: u32,
    pub dst: String,
    /// `connected`, `endpoint`, `no-next-hop` (an endpoint that is not there),
    /// `natGateway`, `unreachable` (the cluster's own ranges in a table that NATs), or
    /// `unsupported` (a kind this datapath does not build yet).
    pub kind: String,
    pub vni: u32,
    pub gateway: String,
    pub mtu: u32,
    /// The endpoint's address, for `endpoint` routes; this Node's NAT address (0.0.0.0:
    /// none yet) for `natGateway` routes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NeighbourRow {
    pub vni: u32,
    pub address: String,
    pub mac: String,
    pub vtep: String,
    /// `seeded` (from a NetworkEndpoint).
    pub source: String,
}

fn segments_of(dir: &Path) -> Result<Vec<(u32, GwSegment)>, CliError> {
    let segs: HashMap<_, u32, GwSegment> =
        HashMap::try_from(Map::HashMap(open(dir, map_names::GW_SEG)?))
            .map_err(|e| CliError::Map(map_names::GW_SEG, e))?;
    let mut out: Vec<(u32, GwSegment)> = segs
        .iter()
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Map(map_names::GW_SEG, e))?;
    out.sort_by_key(|(vni, _)| *vni);
    Ok(out)
}

/// Every gateway segment the Node routes for.
pub fn dump_gw_segments(dir: &Path) -> Result<Vec<GwSegmentRow>, CliError> {
    Ok(segments_of(dir)?
        .into_iter()
        .map(|(vni, s)| GwSegmentRow {
            vni,
            gateway: raw_ip(s.gw_ip),
            gateway_mac: crate::format_mac(&s.gw_mac.mac),
            mtu: s.mtu,
            table: s.table,
        })
        .collect())
}

/// The routes of every table a segment uses.
pub fn dump_gw_routes(dir: &Path) -> Result<Vec<RouteRow>, CliError> {
    let mut slots: Vec<u32> = segments_of(dir)?.iter().map(|(_, s)| s.table).collect();
    slots.sort_unstable();
    slots.dedup();
    let outer: ArrayOfMaps<MapData, MapData> =
        ArrayOfMaps::try_from(Map::ArrayOfMaps(open(dir, map_names::GW_RT)?))
            .map_err(|e| CliError::Map(map_names::GW_RT, e))?;
    let mut rows = Vec::new();
    for table in slots {
        let inner = outer
            .get(&table, 0)
            .map_err(|e| CliError::Map(map_names::GW_RT, e))?;
        let trie: LpmTrie<_, [u8; 4], RouteEntry> = LpmTrie::try_from(Map::LpmTrie(inner))
            .map_err(|e| CliError::Map(map_names::GW_RT, e))?;
        let mut routes: Vec<(Key<[u8; 4]>, RouteEntry)> = trie
            .iter()
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::Map(map_names::GW_RT, e))?;
        routes.sort_by_key(|(k, _)| (k.data(), k.prefix_len()));
        rows.extend(routes.into_iter().map(|(k, r)| {
            RouteRow {
                table,
                dst: format!("{}/{}", Ipv4Addr::from(k.data()), k.prefix_len()),
                kind: match r.kind {
                    ROUTE_CONNECTED => "connected",
                    ROUTE_ENDPOINT => "endpoint",
                    ROUTE_NO_NEXT_HOP => "no-next-hop",
                    ROUTE_NAT_GW => "natGateway",
                    ROUTE_INTERNET_GW => "internetGateway",
                    ROUTE_UNREACHABLE => "unreachable",
                    ROUTE_NO_SERVICES => "no-services",
                    _ => "unsupported",
                }
                .into(),
                // A NATGateway route's (and an internet gateway's, falling back to
                // one): the address this Node translates to.
                next_hop: matches!(r.kind, ROUTE_ENDPOINT | ROUTE_NAT_GW | ROUTE_INTERNET_GW)
                    .then(|| raw_ip(r.nh_ip)),
                vni: r.vni,
                gateway: raw_ip(r.gw_ip),
                mtu: r.mtu,
            }
        }));
    }
    Ok(rows)
}

/// The neighbours of every gateway segment: seeded by the daemon, then learned by the
/// datapath from ARP.
pub fn dump_gw_neighbours(dir: &Path) -> Result<Vec<NeighbourRow>, CliError> {
    let mut rows = Vec::new();
    for name in [map_names::GW_NBR, map_names::GW_SNOOP] {
        let map: HashMap<_, NbrKey, NbrEntry> = Map::from_map_data(open(dir, name)?)
            .and_then(HashMap::try_from)
            .map_err(|e| CliError::Map(name, e))?;
        let mut found: Vec<(NbrKey, NbrEntry)> = map
            .iter()
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::Map(name, e))?;
        found.sort_by_key(|(k, _)| (k.vni, u32::from_be(k.ip)));
        rows.extend(found.into_iter().map(|(k, n)| {
            NeighbourRow {
                vni: k.vni,
                address: raw_ip(k.ip),
                mac: crate::format_mac(&n.mac.mac),
                vtep: Ipv4Addr::from(n.vtep).to_string(),
                source: if n.flags & NBR_SEEDED != 0 {
                    "seeded"
                } else {
                    "learned"
                }
                .into(),
            }
        }));
    }
    Ok(rows)
}

/// The router's counters, summed over CPUs.
pub fn dump_gw_stats(dir: &Path) -> Result<Vec<(String, u64)>, CliError> {
    let names: Vec<(u32, &str)> = GwStat::ALL.iter().map(|s| (*s as u32, s.name())).collect();
    crate::cli::maps::named_counters(dir, map_names::GW_STATS, &names)
}
