//! `bpf dump`: a Node's pinned maps (MX-03, L2-30): the learning tables with the NIC
//! behind each port, and the drop counters.
use std::path::Path;

use aya::maps::{ArrayOfMaps, HashMap, Map, MapData, PerCpuArray};
use juneau_common::{DropReason, FdbEntry, FdbKey, map_names};
use serde::Serialize;

use super::{CliError, open};

/// One learned entry, as the dump shows it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FdbRow {
    pub mac: String,
    pub ifindex: u32,
    /// The NIC behind a local port (`<namespace>/<pod>.<iface>`), empty when unknown.
    pub port: String,
    /// Remote VTEP, empty for a local port.
    pub vtep: String,
    /// Seconds since the entry was last refreshed.
    pub age_seconds: u64,
}

/// The learned table of segment `vni` (L2-30).
pub fn dump_fdb(dir: &Path, vni: u32) -> Result<Vec<FdbRow>, CliError> {
    let vnis: HashMap<_, u32, u32> = HashMap::try_from(Map::HashMap(open(dir, map_names::L2_VNI)?))
        .map_err(|e| CliError::Map(map_names::L2_VNI, e))?;
    let slot = vnis.get(&vni, 0).map_err(|_| CliError::NoSuchVni(vni))?;
    let outer: ArrayOfMaps<MapData, MapData> =
        ArrayOfMaps::try_from(Map::ArrayOfMaps(open(dir, map_names::L2_FDB)?))
            .map_err(|e| CliError::Map(map_names::L2_FDB, e))?;
    let inner = outer
        .get(&slot, 0)
        .map_err(|e| CliError::Map(map_names::L2_FDB, e))?;
    let table: HashMap<_, FdbKey, FdbEntry> =
        HashMap::try_from(Map::HashMap(inner)).map_err(|e| CliError::Map(map_names::L2_FDB, e))?;
    let now = crate::node::dataplane::monotonic_coarse_ns();
    let mut rows: Vec<FdbRow> = table
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Map(map_names::L2_FDB, e))?
        .into_iter()
        .map(|(k, e)| FdbRow {
            mac: crate::format_mac(&k.mac),
            ifindex: e.ifindex,
            port: String::new(),
            vtep: if e.vtep == 0 {
                String::new()
            } else {
                std::net::Ipv4Addr::from(e.vtep).to_string()
            },
            age_seconds: now.saturating_sub(e.last_seen_ns) / 1_000_000_000,
        })
        .collect();
    rows.sort_by(|a, b| a.mac.cmp(&b.mac));
    Ok(rows)
}

/// Drop counters by reason, summed over CPUs.
pub fn dump_drops(dir: &Path) -> Result<Vec<(String, u64)>, CliError> {
    let names: Vec<(u32, &str)> = DropReason::ALL
        .iter()
        .map(|r| (*r as u32, r.name()))
        .collect();
    named_counters(dir, map_names::DROPS, &names)
}

/// The per-CPU counters of `map` at the given slots, summed over CPUs, by name.
pub(crate) fn named_counters(
    dir: &Path,
    map: &'static str,
    names: &[(u32, &str)],
) -> Result<Vec<(String, u64)>, CliError> {
    let counters: PerCpuArray<_, u64> = PerCpuArray::try_from(Map::PerCpuArray(open(dir, map)?))
        .map_err(|e| CliError::Map(map, e))?;
    names
        .iter()
        .map(|(slot, name)| {
            let v = counters.get(slot, 0).map_err(|e| CliError::Map(map, e))?;
            Ok(((*name).to_owned(), v.iter().sum()))
        })
        .collect()
}

/// Parses `vni=<N>`.
pub fn parse_inner_key(s: &str) -> Result<u32, CliError> {
    s.strip_prefix("vni=")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| CliError::Usage(format!("--inner-key {s:?}: write vni=<number>")))
}
