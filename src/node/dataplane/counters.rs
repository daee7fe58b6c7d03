//! What the datapath counts and costs: drops by reason, memory charged for its maps.
use std::collections::BTreeMap;

use aya::maps::{Map, MapData, PerCpuArray};
use juneau_common::{DropReason, map_names};

use super::{Dataplane, DataplaneError, map_err};

impl Dataplane {
    /// Bytes the kernel charges for every map of this datapath (fdinfo `memlock`),
    /// learning tables included.
    pub fn memlock_bytes(&self) -> u64 {
        use std::os::fd::{AsFd, AsRawFd};
        let fdinfo = |fd: i32| -> u64 {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
                .ok()
                .and_then(|t| {
                    t.lines().find_map(|l| {
                        l.strip_prefix("memlock:")
                            .map(|v| v.trim().parse().unwrap_or(0))
                    })
                })
                .unwrap_or(0)
        };
        let outer: u64 = self
            .ebpf
            .maps()
            .filter_map(|(_, m)| {
                let data: Option<&MapData> = match m {
                    Map::Array(d)
                    | Map::ArrayOfMaps(d)
                    | Map::HashMap(d)
                    | Map::PerCpuArray(d)
                    | Map::LruHashMap(d) => Some(d),
                    _ => None,
                };
                data.map(|d| fdinfo(d.fd().as_fd().as_raw_fd()))
            })
            .sum();
        let inner: u64 = self
            .fdbs
            .values()
            .map(|d| fdinfo(d.fd().as_fd().as_raw_fd()))
            .sum();
        outer + inner
    }

    /// Drop counters summed over CPUs, by reason.
    pub fn drops(&self) -> Result<BTreeMap<&'static str, u64>, DataplaneError> {
        let slots = DropReason::ALL
            .iter()
            .map(|r| (*r as u32, r.name()))
            .collect::<Vec<_>>();
        Ok(self
            .named_counters(map_names::DROPS, &slots)?
            .into_iter()
            .collect())
    }

    /// The per-CPU counters of `map` at `slots`, summed over CPUs, by name.
    pub(super) fn named_counters(
        &self,
        map: &'static str,
        slots: &[(u32, &'static str)],
    ) -> Result<Vec<(&'static str, u64)>, DataplaneError> {
        let counters: PerCpuArray<_, u64> =
            PerCpuArray::try_from(self.map(map)?).map_err(map_err(map))?;
        slots
            .iter()
            .map(|(slot, name)| {
                let per_cpu = counters.get(slot, 0).map_err(map_err(map))?;
                Ok((*name, per_cpu.iter().sum()))
            })
            .collect()
    }
}

impl Dataplane {
    /// Runs and run time (ns) of each program, from the kernel's per-program statistics
    /// (`/proc/self/fdinfo` of its descriptor). Zero while BPF statistics are off.
    pub fn program_stats(&self) -> Vec<(&'static str, u64, u64)> {
        use std::os::fd::AsFd;
        juneau_common::prog_names::ALL
            .iter()
            .map(|name| {
                let (runs, ns) = self
                    .program(name)
                    .fd()
                    .map(|fd| run_stats(fd.as_fd()))
                    .unwrap_or_default();
                (*name, runs, ns)
            })
            .collect()
    }
}

/// Runs and run time (ns) of the program behind `fd`, from `/proc/self/fdinfo`: what
/// the kernel counts while BPF statistics are on (zero otherwise).
pub fn run_stats(fd: std::os::fd::BorrowedFd<'_>) -> (u64, u64) {
    use std::os::fd::AsRawFd;
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
        .unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("run_cnt:"), field("run_time_ns:"))
}
