//! Router map writes: the tail-called programs in `jn_progs`, gateway segments
//! (`jn_gw_seg`), one LPM trie per RouteTable (`jn_gw_rt`), neighbours (`jn_gw_nbr`) and
//! the gateway bit and MAC of each port.
//!
//! Order, so that no packet sees half a change: a changed table is built whole in a
//! new trie and a free slot before any segment points at it; segments are written
//! before the ports that enter the router through them, and ports stop entering
//! before their segment goes. A slot a table left keeps its old trie (nothing points
//! at it) until a later table reuses it.
use std::collections::{BTreeMap, BTreeSet};

use aya::maps::{
    ArrayOfMaps, HashMap as BpfHashMap, LpmTrie, Map, MapData, ProgramArray, lpm_trie::Key,
};
use juneau_common::{
    FdbKey, GwSegment, NbrEntry, NbrKey, RouteEntry,
    gw::{GwStat, MAX_ROUTE_TABLES, NBR_SEEDED, ROUTES_PER_TABLE},
    map_names,
    port::{PORT_EIP, PORT_GATEWAY},
    tail::TAIL_PROGRAMS,
};

use super::{Dataplane, DataplaneError, map_err, prog_err};
use crate::node::gateway::{RouteSpec, RouterState};

/// What the router maps hold, as this daemon wrote (or found) them.
#[derive(Debug, Default)]
pub(super) struct RouterMaps {
    /// Table name -> (slot, routes).
    tables: BTreeMap<String, (u32, BTreeSet<RouteSpec>)>,
    /// Slots that may hold a trie no segment points at.
    stale_slots: BTreeSet<u32>,
    segments: BTreeMap<u32, GwSegment>,
    neighbours: BTreeMap<NbrKey, NbrEntry>,
    /// Gateway MAC by VNI, for ports configured between two syncs.
    pub(super) gateway_macs: BTreeMap<u32, [u8; 6]>,
    /// False until the first sync, which also removes what a previous daemon left.
    synced: bool,
}

/// What one sync changed (for the log and the tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterSync {
    pub tables: usize,
    pub segments: usize,
    pub neighbours: usize,
    pub ports: usize,
    /// Tables left out (logged).
    pub failed: usize,
}

impl RouterSync {
    pub fn is_empty(&self) -> bool {
        *self == RouterSync::default()
    }
}

/// A writable handle on the hash map `name` (borrowing only the object's maps, so the
/// router's record can be updated beside it).
fn hash_mut<'a, K: aya::Pod, V: aya::Pod>(
    ebpf: &'a mut aya::Ebpf,
    name: &'static str,
) -> Result<BpfHashMap<&'a mut MapData, K, V>, DataplaneError> {
    let map = ebpf.map_mut(name).ok_or(DataplaneError::Missing(name))?;
    BpfHashMap::try_from(map).map_err(map_err(name))
}

/// A delete of a key that is gone succeeds (aya reports it as ENOENT from the syscall).
fn removed(r: Result<(), aya::maps::MapError>) -> Result<(), aya::maps::MapError> {
    match r {
        Err(aya::maps::MapError::KeyNotFound) => Ok(()),
        Err(aya::maps::MapError::SyscallError(e))
            if e.io_error.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(())
        }
        r => r,
    }
}

fn raw_ip(ip: std::net::Ipv4Addr) -> u32 {
    u32::from_ne_bytes(ip.octets())
}

fn route_entry(r: &RouteSpec) -> RouteEntry {
    RouteEntry {
        kind: r.kind,
        vni: r.vni,
        gw_ip: raw_ip(r.gw_ip),
        mtu: r.mtu,
        gw_mac: r.gw_mac,
        pad: [0; 2],
        nh_ip: raw_ip(r.nh_ip),
    }
}

impl Dataplane {
    /// Puts this instance's tail-called programs (`juneau_common::tail`: the router,
    /// the ElasticIP port and uplink programs) into `jn_progs` (an adopted array gets
    /// each new program in one write: the next tail call enters it).
    pub(super) fn install_tail_programs(&mut self) -> Result<(), DataplaneError> {
        for (slot, name) in TAIL_PROGRAMS {
            let fd = self
                .program(name)
                .fd()
                .map_err(prog_err(name))?
                .try_clone()
                .map_err(|e| DataplaneError::Program {
                    name,
                    source: aya::programs::ProgramError::IOError(e),
                })?;
            let mut progs: ProgramArray<_> =
                ProgramArray::try_from(self.map_mut(map_names::PROGS)?)
                    .map_err(map_err(map_names::PROGS))?;
            progs.set(slot, &fd, 0).map_err(map_err(map_names::PROGS))?;
        }
        Ok(())
    }

    /// True when the router serves segment `vni` (its ports get the gateway bit).
    pub fn router_knows(&self, vni: u32) -> bool {
        self.router.gateway_macs.contains_key(&vni)
    }

    /// The gateway bit and MAC a port of `vni` gets.
    pub(super) fn gateway_bits(&self, vni: u32) -> (u32, FdbKey) {
        match self.router.gateway_macs.get(&vni) {
            Some(mac) => (PORT_GATEWAY, FdbKey::new(*mac)),
            None => (0, FdbKey::default()),
        }
    }

    /// What a previous daemon left in the router maps: its segments (and the table
    /// slots they point at) and neighbours, to be replaced or removed by the first sync.
    fn read_router_maps(&mut self) -> Result<(), DataplaneError> {
        let segs: BpfHashMap<_, u32, GwSegment> =
            BpfHashMap::try_from(self.map(map_names::GW_SEG)?)
                .map_err(map_err(map_names::GW_SEG))?;
        let found: Vec<(u32, GwSegment)> = segs
            .iter()
            .collect::<Result<_, _>>()
            .map_err(map_err(map_names::GW_SEG))?;
        let nbrs: BpfHashMap<_, NbrKey, NbrEntry> =
            BpfHashMap::try_from(self.map(map_names::GW_NBR)?)
                .map_err(map_err(map_names::GW_NBR))?;
        let neighbours: Vec<(NbrKey, NbrEntry)> = nbrs
            .iter()
            .collect::<Result<_, _>>()
            .map_err(map_err(map_names::GW_NBR))?;
        for (vni, seg) in found {
            self.router.stale_slots.insert(seg.table);
            self.router.segments.insert(vni, seg);
        }
        self.router.neighbours.extend(neighbours);
        Ok(())
    }

    /// Brings the router maps and the ports' gateway bits to `want`. A table that
    /// cannot be written (too many routes, no free slot) is logged and left out with
    /// the segments that route by it; every other table, segment and neighbour is
    /// still written. The record of what the maps hold (`self.router`) follows each
    /// write as it succeeds, so a failure midway never lets a slot that a segment
    /// still points at be handed to another table.
    pub fn sync_router(&mut self, want: &RouterState) -> Result<RouterSync, DataplaneError> {
        if !self.router.synced {
            self.read_router_maps()?;
            self.router.synced = true;
        }
        let mut done = RouterSync::default();
        // 1. Tables: a changed one is built aside, in a slot nothing points at.
        for (name, routes) in &want.tables {
            if self
                .router
                .tables
                .get(name)
                .is_some_and(|(_, r)| r == routes)
            {
                continue;
            }
            let written = self
                .free_table_slot()
                .and_then(|slot| self.write_table(slot, name, routes).map(|()| slot));
            match written {
                Ok(slot) => {
                    if let Some((old, _)) = self
                        .router
                        .tables
                        .insert(name.clone(), (slot, routes.clone()))
                    {
                        self.router.stale_slots.insert(old);
                    }
                    done.tables += 1;
                }
                Err(e) => {
                    tracing::error!(table = name, error = %e, "route table left out");
                    done.failed += 1;
                }
            }
        }
        let gone: Vec<String> = self
            .router
            .tables
            .keys()
            .filter(|t| !want.tables.contains_key(*t))
            .cloned()
            .collect();
        for t in gone {
            if let Some((slot, _)) = self.router.tables.remove(&t) {
                self.router.stale_slots.insert(slot);
            }
        }
        // 2. Segments, pointing at their tables.
        let mut serving = BTreeSet::new();
        for (vni, s) in &want.segments {
            let Some((slot, _)) = self.router.tables.get(&s.table) else {
                continue;
            };
            let seg = GwSegment {
                gw_ip: raw_ip(s.gw_ip),
                table: *slot,
                mtu: s.mtu,
                prefix_len: s.prefix_len,
                gw_mac: FdbKey::new(s.gw_mac),
            };
            if self.router.segments.get(vni) != Some(&seg) {
                let mut segs: BpfHashMap<_, u32, GwSegment> =
                    hash_mut(&mut self.ebpf, map_names::GW_SEG)?;
                segs.insert(vni, seg, 0)
                    .map_err(map_err(map_names::GW_SEG))?;
                self.router.segments.insert(*vni, seg);
                done.segments += 1;
            }
            serving.insert(*vni);
        }
        // 3. Ports enter the router only through a segment that is written.
        self.router.gateway_macs = want
            .segments
            .iter()
            .filter(|(v, _)| serving.contains(*v))
            .map(|(v, s)| (*v, s.gw_mac))
            .collect();
        done.ports = self.rewrite_port_gateways()?;
        // Only gateway segments have listeners.
        self.write_listen_lists()?;
        // 4. Segments that lost their gateway, now that no port enters through them;
        //    what the datapath learned on them goes too.
        let leaving: Vec<u32> = self
            .router
            .segments
            .keys()
            .filter(|v| !serving.contains(*v))
            .copied()
            .collect();
        for vni in &leaving {
            let mut segs: BpfHashMap<_, u32, GwSegment> =
                hash_mut(&mut self.ebpf, map_names::GW_SEG)?;
            match removed(segs.remove(vni)) {
                Ok(()) => {}
                Err(e) => return Err(map_err(map_names::GW_SEG)(e)),
            }
            self.router.segments.remove(vni);
            done.segments += 1;
        }
        if !leaving.is_empty() {
            self.forget_learned(|k| leaving.contains(&k.vni))?;
        }
        // 5. Neighbours.
        done.neighbours = self.sync_neighbours(want)?;
        Ok(done)
    }

    /// Deletes learned neighbours that match.
    fn forget_learned(&mut self, stale: impl Fn(&NbrKey) -> bool) -> Result<usize, DataplaneError> {
        let mut map: BpfHashMap<_, NbrKey, NbrEntry> =
            hash_mut(&mut self.ebpf, map_names::GW_SNOOP)?;
        let keys: Vec<NbrKey> = map
            .keys()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(map_names::GW_SNOOP))?
            .into_iter()
            .filter(|k| stale(k))
            .collect();
        let mut removed = 0;
        for k in &keys {
            if map.remove(k).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn free_table_slot(&self) -> Result<u32, DataplaneError> {
        let used: BTreeSet<u32> = self
            .router
            .tables
            .values()
            .map(|(s, _)| *s)
            .chain(self.router.segments.values().map(|s| s.table))
            .collect();
        (0..MAX_ROUTE_TABLES)
            .find(|s| !used.contains(s))
            .ok_or_else(|| DataplaneError::RouteTables(MAX_ROUTE_TABLES))
    }

    fn write_table(
        &mut self,
        slot: u32,
        name: &str,
        routes: &BTreeSet<RouteSpec>,
    ) -> Result<(), DataplaneError> {
        if routes.len() > ROUTES_PER_TABLE as usize {
            return Err(DataplaneError::TooManyRoutes {
                table: name.to_owned(),
                routes: routes.len(),
            });
        }
        let trie_name = format!("jn_rt_{slot}");
        let obj = aya_obj::Map::new_from_params(
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_LPM_TRIE as u32,
            size_of::<Key<[u8; 4]>>() as u32,
            size_of::<RouteEntry>() as u32,
            ROUTES_PER_TABLE,
            aya_obj::generated::BPF_F_NO_PREALLOC,
        );
        let inner = MapData::create(obj, &trie_name, None).map_err(map_err(&trie_name))?;
        {
            let id = inner.info().map_err(map_err(&trie_name))?.id();
            let data = MapData::from_id(id).map_err(map_err(&trie_name))?;
            let mut trie: LpmTrie<_, [u8; 4], RouteEntry> =
                LpmTrie::try_from(Map::LpmTrie(data)).map_err(map_err(&trie_name))?;
            for r in routes {
                let key = Key::new(r.dst.prefix_len() as u32, r.dst.network().octets());
                trie.insert(&key, route_entry(r), 0)
                    .map_err(map_err(&trie_name))?;
            }
        }
        let mut outer: ArrayOfMaps<_, MapData> =
            ArrayOfMaps::try_from(self.map_mut(map_names::GW_RT)?)
                .map_err(map_err(map_names::GW_RT))?;
        outer
            .set(slot, &inner, 0)
            .map_err(map_err(map_names::GW_RT))?;
        self.router.stale_slots.remove(&slot);
        tracing::debug!(
            table = name,
            slot,
            routes = routes.len(),
            "route table written"
        );
        Ok(())
    }

    /// Sets or clears the gateway bit and MAC of every port whose segment's gateway
    /// changed. Returns how many ports were written.
    pub(super) fn rewrite_port_gateways(&mut self) -> Result<usize, DataplaneError> {
        let ports: Vec<u32> = self.segments.ports().collect();
        let mut written = 0;
        for ifindex in ports {
            let Some(vni) = self.segments.vni_of(ifindex) else {
                continue;
            };
            let (bit, mac) = self.gateway_bits(vni);
            let mut port = self.port(ifindex)?;
            // A direct ElasticIP NIC's MAC for 169.254.0.1 is its network's, never a
            // segment gateway's.
            let direct = port.flags & PORT_EIP != 0;
            if direct || (port.flags & PORT_GATEWAY == bit && port.gw_mac == mac) {
                continue;
            }
            port.flags = (port.flags & !PORT_GATEWAY) | bit;
            port.gw_mac = mac;
            self.write_port(ifindex, port)?;
            written += 1;
        }
        Ok(written)
    }

    fn sync_neighbours(&mut self, want: &RouterState) -> Result<usize, DataplaneError> {
        let desired: BTreeMap<NbrKey, NbrEntry> = want
            .neighbours
            .iter()
            .map(|((vni, ip), n)| {
                (
                    NbrKey {
                        vni: *vni,
                        ip: raw_ip(*ip),
                    },
                    NbrEntry {
                        mac: FdbKey::new(n.mac),
                        vtep: n.vtep.to_bits(),
                        flags: NBR_SEEDED,
                    },
                )
            })
            .collect();
        let mut map: BpfHashMap<_, NbrKey, NbrEntry> = hash_mut(&mut self.ebpf, map_names::GW_NBR)?;
        let mut changed = 0;
        // Removals first: a full table makes room before it takes new entries.
        let gone: Vec<NbrKey> = self
            .router
            .neighbours
            .keys()
            .filter(|k| !desired.contains_key(*k))
            .copied()
            .collect();
        for k in &gone {
            match removed(map.remove(k)) {
                Ok(()) => changed += 1,
                Err(e) => return Err(map_err(map_names::GW_NBR)(e)),
            }
            self.router.neighbours.remove(k);
        }
        let mut seeded = Vec::new();
        for (k, v) in &desired {
            if self.router.neighbours.get(k) != Some(v) {
                map.insert(k, v, 0).map_err(map_err(map_names::GW_NBR))?;
                self.router.neighbours.insert(*k, *v);
                seeded.push(*k);
                changed += 1;
            }
        }
        // An address learned from ARP before Juneau's record of it arrived (a Pod's
        // first ARP comes before its NetworkEndpoint) is the seeded one's from now on:
        // the learned binding must not come back when the seeded one goes.
        if !seeded.is_empty() {
            let mut learned: BpfHashMap<_, NbrKey, NbrEntry> =
                hash_mut(&mut self.ebpf, map_names::GW_SNOOP)?;
            for k in &seeded {
                match removed(learned.remove(k)) {
                    Ok(()) => {}
                    Err(e) => return Err(map_err(map_names::GW_SNOOP)(e)),
                }
            }
        }
        self.router.neighbours = desired;
        Ok(changed)
    }

    /// The router's counters, summed over CPUs, by name.
    pub fn gw_stats(&self) -> Result<Vec<(&'static str, u64)>, DataplaneError> {
        let slots = GwStat::ALL
            .iter()
            .map(|s| (*s as u32, s.name()))
            .collect::<Vec<_>>();
        self.named_counters(map_names::GW_STATS, &slots)
    }

    /// The neighbours the datapath holds, seeded then learned (dumps and tests).
    pub fn gw_neighbours(&self) -> Result<Vec<(NbrKey, NbrEntry)>, DataplaneError> {
        let mut out = Vec::new();
        for name in [map_names::GW_NBR, map_names::GW_SNOOP] {
            let map: BpfHashMap<_, NbrKey, NbrEntry> =
                BpfHashMap::try_from(self.map(name)?).map_err(map_err(name))?;
            for entry in map.iter() {
                out.push(entry.map_err(map_err(name))?);
            }
        }
        Ok(out)
    }
}
