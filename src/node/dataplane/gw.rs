//! The router's map writer: gateway segments (`jn_gw_seg`), one LPM trie per
//! RouteTable (`jn_gw_rt`), neighbours (`jn_gw_nbr`, and the learned ones of
//! `jn_gw_snoop` it retires). It owns those maps (taken out of the loaded object by
//! [`Dataplane::take_router`]), so the router feature writes them under its own lock;
//! the ports' gateway bits belong to the port owner ([`Dataplane::set_gateways`]),
//! which the sync hands the gateways to between its steps.
//!
//! Order, so that no packet sees half a change: a changed table is built whole in a
//! new trie and a free slot before any segment points at it; segments are written
//! before the ports that enter the router through them, and ports stop entering
//! before their segment goes. A slot a table left keeps its old trie (nothing points
//! at it) until a later table reuses it.
use std::collections::{BTreeMap, BTreeSet};

use aya::maps::{
    Array as BpfArray, ArrayOfMaps, HashMap as BpfHashMap, LpmTrie, Map, MapData, lpm_trie::Key,
};
use juneau_common::{
    FdbKey, GwSegment, NbrEntry, NbrKey, RouteEntry,
    gw::{MAX_ROUTE_TABLES, NBR_SEEDED, ROUTES_PER_TABLE, SEG_PROVIDER, SEG_SERVICES},
    map_names,
};

use super::{Dataplane, DataplaneError, Gateway, map_err};
use crate::features::router::gateway::{RouteSpec, RouterState};

/// What the router maps hold, as this daemon wrote (or found) them.
#[derive(Debug, Default)]
struct RouterRecord {
    /// Table name -> (slot, routes).
    tables: BTreeMap<String, (u32, BTreeSet<RouteSpec>)>,
    /// Slots that may hold a trie no segment points at.
    stale_slots: BTreeSet<u32>,
    segments: BTreeMap<u32, GwSegment>,
    neighbours: BTreeMap<NbrKey, NbrEntry>,
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

/// The router's maps and the record of what they hold. Made by
/// [`Dataplane::take_router`]; a daemon keeps it behind the router feature's lock.
pub struct RouterWriter {
    seg: BpfHashMap<MapData, u32, GwSegment>,
    nbr: BpfHashMap<MapData, NbrKey, NbrEntry>,
    snoop: BpfHashMap<MapData, NbrKey, NbrEntry>,
    rt: ArrayOfMaps<MapData, MapData>,
    /// `jn_gw_epoch`: bumped when a table or a segment changes, so that the NAT fast
    /// path's cached hops (`ct::NatHop`) are looked up again.
    epoch: BpfArray<MapData, u32>,
    record: RouterRecord,
}

impl Dataplane {
    /// Hands the router's maps to their writer: from now on only it writes them (a
    /// second call finds them gone: [`DataplaneError::Missing`]).
    pub fn take_router(&mut self) -> Result<RouterWriter, DataplaneError> {
        Ok(RouterWriter {
            seg: self.take_map(map_names::GW_SEG)?,
            nbr: self.take_map(map_names::GW_NBR)?,
            snoop: self.take_map(map_names::GW_SNOOP)?,
            rt: self.take_map(map_names::GW_RT)?,
            epoch: self.take_map(map_names::GW_EPOCH)?,
            record: RouterRecord::default(),
        })
    }
}

impl RouterWriter {
    /// What a previous daemon left in the router maps: its segments (and the table
    /// slots they point at) and neighbours, to be replaced or removed by the first sync.
    fn read_maps(&mut self) -> Result<(), DataplaneError> {
        let found: Vec<(u32, GwSegment)> = self
            .seg
            .iter()
            .collect::<Result<_, _>>()
            .map_err(map_err(map_names::GW_SEG))?;
        let neighbours: Vec<(NbrKey, NbrEntry)> = self
            .nbr
            .iter()
            .collect::<Result<_, _>>()
            .map_err(map_err(map_names::GW_NBR))?;
        for (vni, seg) in found {
            self.record.stale_slots.insert(seg.table);
            self.record.segments.insert(vni, seg);
        }
        self.record.neighbours.extend(neighbours);
        Ok(())
    }

    /// Brings the router maps to `want`, and the ports' gateway bits by
    /// `set_gateways` (the port owner's write, given the gateway MAC of every segment
    /// the router serves; it returns how many ports it wrote). A table that cannot be
    /// written (too many routes, no free slot) is logged and left out with the
    /// segments that route by it; every other table, segment and neighbour is still
    /// written. The record of what the maps hold follows each write as it succeeds, so
    /// a failure midway never lets a slot that a segment still points at be handed to
    /// another table.
    pub fn sync(
        &mut self,
        want: &RouterState,
        mut set_gateways: impl FnMut(BTreeMap<u32, Gateway>) -> Result<usize, DataplaneError>,
    ) -> Result<RouterSync, DataplaneError> {
        if !self.record.synced {
            self.read_maps()?;
            self.record.synced = true;
        }
        let mut done = RouterSync::default();
        // 1. Tables: a changed one is built aside, in a slot nothing points at.
        for (name, routes) in &want.tables {
            if self
                .record
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
                        .record
                        .tables
                        .insert(name.clone(), (slot, routes.clone()))
                    {
                        self.record.stale_slots.insert(old);
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
            .record
            .tables
            .keys()
            .filter(|t| !want.tables.contains_key(*t))
            .cloned()
            .collect();
        let tables_gone = !gone.is_empty();
        for t in gone {
            if let Some((slot, _)) = self.record.tables.remove(&t) {
                self.record.stale_slots.insert(slot);
            }
        }
        // 2a. A served segment that gains a NetworkACL: its ports carry `PORT_ACL` before
        //     the segment names the ACL, so that no outside packet enters one of them
        //     straight in between (the bit fails closed; step 3 sets the rest).
        let gaining = want
            .segments
            .iter()
            .any(|(v, s)| s.acl != 0 && self.record.segments.get(v).is_some_and(|r| r.acl == 0));
        if gaining {
            let early = self
                .record
                .segments
                .iter()
                .map(|(v, r)| {
                    let acl = r.acl != 0 || want.segments.get(v).is_some_and(|s| s.acl != 0);
                    (
                        *v,
                        Gateway {
                            mac: r.gw_mac.mac,
                            acl,
                        },
                    )
                })
                .collect();
            set_gateways(early)?;
        }
        // 2. Segments, pointing at their tables.
        let mut serving = BTreeSet::new();
        for (vni, s) in &want.segments {
            let Some((slot, _)) = self.record.tables.get(&s.table) else {
                continue;
            };
            let seg = GwSegment {
                gw_ip: raw_ip(s.gw_ip),
                table: *slot,
                mtu: s.mtu,
                prefix_len: s.prefix_len,
                gw_mac: FdbKey::new(s.gw_mac),
                flags: if s.services { SEG_SERVICES } else { 0 }
                    | if s.provider { SEG_PROVIDER } else { 0 },
                acl: s.acl,
            };
            if self.record.segments.get(vni) != Some(&seg) {
                self.seg
                    .insert(vni, seg, 0)
                    .map_err(map_err(map_names::GW_SEG))?;
                self.record.segments.insert(*vni, seg);
                done.segments += 1;
            }
            serving.insert(*vni);
        }
        // Routes or segments changed: the hops cached from the old ones are stale.
        if done.tables > 0 || done.segments > 0 || tables_gone {
            self.bump_epoch()?;
        }
        // 3. Ports enter the router only through a segment that is written (and their
        //    listener lists follow the gateways).
        let gateways = want
            .segments
            .iter()
            .filter(|(v, _)| serving.contains(*v))
            .map(|(v, s)| {
                let g = Gateway {
                    mac: s.gw_mac,
                    acl: s.acl != 0,
                };
                (*v, g)
            })
            .collect();
        done.ports = set_gateways(gateways)?;
        // 4. Segments that lost their gateway, now that no port enters through them;
        //    what the datapath learned on them goes too.
        let leaving: Vec<u32> = self
            .record
            .segments
            .keys()
            .filter(|v| !serving.contains(*v))
            .copied()
            .collect();
        for vni in &leaving {
            removed(self.seg.remove(vni)).map_err(map_err(map_names::GW_SEG))?;
            self.record.segments.remove(vni);
            done.segments += 1;
        }
        if !leaving.is_empty() {
            self.forget_learned(|k| leaving.contains(&k.vni))?;
        }
        // 5. Neighbours.
        done.neighbours = self.sync_neighbours(want)?;
        Ok(done)
    }

    /// The routes' epoch, one on: the NAT fast path looks its hops up again.
    fn bump_epoch(&mut self) -> Result<(), DataplaneError> {
        let name = map_names::GW_EPOCH;
        let now = self.epoch.get(&0, 0).map_err(map_err(name))?;
        self.epoch
            .set(0, now.wrapping_add(1), 0)
            .map_err(map_err(name))
    }

    /// The routes' epoch (tests).
    pub fn epoch(&self) -> Result<u32, DataplaneError> {
        self.epoch.get(&0, 0).map_err(map_err(map_names::GW_EPOCH))
    }

    /// Deletes learned neighbours that match.
    fn forget_learned(&mut self, stale: impl Fn(&NbrKey) -> bool) -> Result<usize, DataplaneError> {
        let keys: Vec<NbrKey> = self
            .snoop
            .keys()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(map_names::GW_SNOOP))?
            .into_iter()
            .filter(|k| stale(k))
            .collect();
        let mut removed = 0;
        for k in &keys {
            if self.snoop.remove(k).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The lowest slot no table or segment of the record holds.
    fn free_table_slot(&self) -> Result<u32, DataplaneError> {
        let mut slots = crate::alloc::Pool::new([(0, MAX_ROUTE_TABLES - 1)]);
        let used = self.record.tables.values().map(|(s, _)| *s);
        for s in used.chain(self.record.segments.values().map(|s| s.table)) {
            slots.hold(s);
        }
        slots
            .first_free()
            .ok_or(DataplaneError::RouteTables(MAX_ROUTE_TABLES))
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
        let trie_name = super::pins::route_map_name(slot);
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
        self.rt
            .set(slot, &inner, 0)
            .map_err(map_err(map_names::GW_RT))?;
        self.record.stale_slots.remove(&slot);
        tracing::debug!(
            table = name,
            slot,
            routes = routes.len(),
            "route table written"
        );
        Ok(())
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
        let mut changed = 0;
        // Removals first: a full table makes room before it takes new entries.
        let gone: Vec<NbrKey> = self
            .record
            .neighbours
            .keys()
            .filter(|k| !desired.contains_key(*k))
            .copied()
            .collect();
        for k in &gone {
            removed(self.nbr.remove(k)).map_err(map_err(map_names::GW_NBR))?;
            changed += 1;
            self.record.neighbours.remove(k);
        }
        let mut seeded = Vec::new();
        for (k, v) in &desired {
            if self.record.neighbours.get(k) != Some(v) {
                self.nbr
                    .insert(k, v, 0)
                    .map_err(map_err(map_names::GW_NBR))?;
                self.record.neighbours.insert(*k, *v);
                seeded.push(*k);
                changed += 1;
            }
        }
        // An address learned from ARP before Juneau's record of it arrived (a Pod's
        // first ARP comes before its NetworkEndpoint) is the seeded one's from now on:
        // the learned binding must not come back when the seeded one goes.
        for k in &seeded {
            removed(self.snoop.remove(k)).map_err(map_err(map_names::GW_SNOOP))?;
        }
        self.record.neighbours = desired;
        Ok(changed)
    }

    /// The neighbours the datapath holds, seeded then learned (dumps and tests).
    pub fn neighbours(&self) -> Result<Vec<(NbrKey, NbrEntry)>, DataplaneError> {
        let mut out = Vec::new();
        for (name, map) in [
            (map_names::GW_NBR, &self.nbr),
            (map_names::GW_SNOOP, &self.snoop),
        ] {
            for entry in map.iter() {
                out.push(entry.map_err(map_err(name))?);
            }
        }
        Ok(out)
    }
}
