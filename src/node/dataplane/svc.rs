//! The Services' map writer: frontends (`jn_svc`), backends (`jn_svc_backend`) and one
//! Maglev table per Service (`jn_svc_maglev`, an inner array each). It owns those maps
//! (taken by [`Dataplane::take_services`]), so the Services feature writes them under
//! its own lock.
//!
//! Order, so that no packet sees half a change: a Service's backends are written
//! before its table, its table before its frontend; a frontend goes before its table
//! and the backends only it used. A new Service's table is a new inner array, swapped
//! in with the others of its sync in one batch; a Service whose backends change gets
//! its table rewritten in place, through a mapping of the array it has (each slot is
//! one 4-byte store: a packet reads the old backend or the new one), so that a change
//! costs that Service's slots and no wait for running programs (a map of maps'
//! update waits for an RCU grace period, about 10 ms here). Ids are stable: a
//! Service keeps its id while it exists (its connections name it), a backend its id
//! while any Service uses it; a freed id cools for a second before it is handed out
//! again, so that a program that read it just before it was freed still finds what it
//! named.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use aya::maps::{Array, HashMap as BpfHashMap, MapData};
use juneau_common::{
    map_names,
    svc::{
        BACKEND_HOST, BACKEND_PROVIDER, Backend, MAGLEV_FLAGS, MAGLEV_SLOTS, MAX_BACKENDS,
        MAX_SERVICES, SVC_AFFINITY, SvcEntry, SvcHost, SvcKey,
    },
};

use super::{
    Dataplane, DataplaneError,
    ids::Ids,
    map_err,
    raw::{batch_err, batch_update, lookup_u32, raw_fd, write_mapped},
};
use crate::features::services::node::{Frontend, FrontendKey, ServiceState, maglev};

/// What one sync changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceSync {
    pub frontends: usize,
    pub backends: usize,
    /// New Maglev tables swapped in.
    pub tables: usize,
    /// Tables rewritten where they are (a Service whose backends changed).
    pub rewritten: usize,
}

/// The Services' maps and the record of what they hold.
pub struct ServiceWriter {
    frontends: BpfHashMap<MapData, SvcKey, SvcEntry>,
    backends: Array<MapData, Backend>,
    /// `jn_svc_maglev` (new tables swapped in by batches; a changed Service's
    /// rewritten in place through a mapping).
    tables: MapData,
    /// Frontend -> (id, what was written for it, its Maglev table as indices into the
    /// frontend's backends): a change of backends is applied to the table written.
    written: BTreeMap<FrontendKey, (u32, Frontend, Vec<u32>)>,
    /// Backend -> (id, Services using it).
    backend_ids: BTreeMap<(Ipv4Addr, u16), (u32, usize)>,
    service_ids: Ids,
    backend_slots: Ids,
    /// `jn_svc_host`, and what was written to it.
    host: Array<MapData, SvcHost>,
    host_written: Option<SvcHost>,
    /// Backends reached through the Node's stack (`BACKEND_HOST`), as of this sync.
    host_backends: BTreeSet<Ipv4Addr>,
    /// `provider_backends` of the last sync: their entries get `BACKEND_PROVIDER`.
    provider_backends: BTreeSet<Ipv4Addr>,
    /// False until the first sync, which also removes the frontends a previous daemon
    /// left that are no longer wanted (its connections go on: their entries name the
    /// backend itself, not an id).
    synced: bool,
}

impl Dataplane {
    /// Hands the Services' maps to their writer.
    pub fn take_services(&mut self) -> Result<ServiceWriter, DataplaneError> {
        Ok(ServiceWriter {
            frontends: self.take_map(map_names::SVC)?,
            backends: self.take_map(map_names::SVC_BACKEND)?,
            tables: match self.ebpf.take_map(map_names::SVC_MAGLEV) {
                Some(aya::maps::Map::ArrayOfMaps(data)) => data,
                _ => return Err(DataplaneError::Missing(map_names::SVC_MAGLEV)),
            },
            written: BTreeMap::new(),
            backend_ids: BTreeMap::new(),
            service_ids: Ids::new(MAX_SERVICES, "Services"),
            backend_slots: Ids::new(MAX_BACKENDS, "Service backends"),
            host: self.take_map(map_names::SVC_HOST)?,
            host_written: None,
            host_backends: BTreeSet::new(),
            provider_backends: BTreeSet::new(),
            synced: false,
        })
    }
}

/// Where a staged frontend's table goes.
enum Table {
    /// No backends: no table (the frontend says 0 backends).
    None,
    /// A new inner array, swapped in by the sync's batch.
    New(MapData),
    /// The backend ids of every slot, written over the Service's table in place.
    InPlace(Vec<u32>),
}

/// A frontend staged by a sync: key, id, what it wants, its table's slots (indices
/// into its backends) and its table.
type Staged = (FrontendKey, u32, Frontend, Vec<u32>, Table);

/// The bytes Maglev names a backend by: its address and port.
fn names(backends: &[(Ipv4Addr, u16)]) -> Vec<[u8; 6]> {
    backends
        .iter()
        .map(|(ip, port)| {
            let o = ip.octets();
            let p = port.to_be_bytes();
            [o[0], o[1], o[2], o[3], p[0], p[1]]
        })
        .collect()
}

fn svc_key(k: &FrontendKey) -> SvcKey {
    SvcKey {
        ip: u32::from_ne_bytes(k.ip.octets()),
        port: k.port.to_be(),
        proto: k.proto,
        pad: 0,
    }
}

impl ServiceWriter {
    /// Brings the maps to `want`.
    pub fn sync(&mut self, want: &ServiceState) -> Result<ServiceSync, DataplaneError> {
        let mut done = ServiceSync::default();
        self.host_backends = want.host_backends.clone();
        self.provider_backends = want.provider_backends.clone();
        if !self.synced {
            self.reserve_pinned()?;
            let wanted: BTreeSet<SvcKey> = want.frontends.keys().map(svc_key).collect();
            let left: Vec<SvcKey> = self
                .frontends
                .keys()
                .collect::<Result<Vec<_>, _>>()
                .map_err(map_err(map_names::SVC))?
                .into_iter()
                .filter(|k| !wanted.contains(k))
                .collect();
            for k in left {
                if self.frontends.remove(&k).is_ok() {
                    done.frontends += 1;
                }
            }
            self.synced = true;
        }
        // Frontends that go (or change their key: a new frontend) first, so the ids and
        // backends they free can be reused.
        let gone: Vec<FrontendKey> = self
            .written
            .keys()
            .filter(|k| !want.frontends.contains_key(*k))
            .copied()
            .collect();
        for key in gone {
            let (id, old, _) = self.written.remove(&key).expect("listed above");
            match self.frontends.remove(&svc_key(&key)) {
                Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                Err(aya::maps::MapError::SyscallError(e))
                    if e.io_error.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(map_err(map_names::SVC)(e)),
            }
            done.frontends += 1;
            // Its table stays until the id is reused: nothing points at it now.
            self.service_ids.give_back(id);
            done.backends += self.release(&old.backends);
        }
        let mut staged: Vec<Staged> = Vec::new();
        for (key, front) in &want.frontends {
            if self.written.get(key).is_some_and(|(_, f, _)| f == front) {
                continue;
            }
            let id = match self.written.get(key) {
                Some((id, _, _)) => *id,
                None => self.service_ids.take()?,
            };
            // 1. Backends (new ones get ids).
            let mut ids = Vec::with_capacity(front.backends.len());
            for b in &front.backends {
                match self.acquire(*b, &mut done) {
                    Ok(id) => ids.push(id),
                    Err(e) => {
                        self.release(&front.backends[..ids.len()]);
                        self.unstage(&staged);
                        return Err(e);
                    }
                }
            }
            // 2. The table, built aside: from the one written before
            //    when there is one (only the slots of backends that changed move).
            let slots = match self.written.get(key) {
                Some((_, old, prev)) => maglev::rebalance(
                    prev,
                    &names(&old.backends),
                    &names(&front.backends),
                    MAGLEV_SLOTS,
                ),
                None => maglev::table(&names(&front.backends), MAGLEV_SLOTS),
            };
            let had_table = self
                .written
                .get(key)
                .is_some_and(|(_, _, prev)| !prev.is_empty());
            let table = if slots.is_empty() {
                Table::None
            } else if had_table {
                // Its table is in place: rewritten there (step 3), after every
                // backend of the sync is written.
                Table::InPlace(slots.iter().map(|i| ids[*i as usize]).collect())
            } else {
                match self.make_table(id, slots.iter().map(|i| ids[*i as usize])) {
                    Ok(t) => Table::New(t),
                    Err(e) => {
                        self.release(&front.backends);
                        self.unstage(&staged);
                        return Err(e);
                    }
                }
            };
            staged.push((*key, id, front.clone(), slots, table));
        }
        // 3. Every new table in one batch (the kernel waits for running programs once
        //    per update of a map of maps: once, not once per Service), then the tables
        //    rewritten in place (no wait: nothing is swapped).
        let tables: Vec<(u32, &MapData)> = staged
            .iter()
            .filter_map(|(_, id, _, _, t)| match t {
                Table::New(t) => Some((*id, t)),
                _ => None,
            })
            .collect();
        if let Err(e) = batch_update(
            raw_fd(&self.tables),
            &tables.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            &tables.iter().map(|(_, t)| raw_fd(t)).collect::<Vec<_>>(),
        ) {
            self.unstage(&staged);
            return Err(batch_err(map_names::SVC_MAGLEV, e));
        }
        done.tables += tables.len();
        // A table that cannot be rewritten (it could not be opened or mapped: nothing
        // of it was written) keeps its old slots, which its old backends, still held,
        // serve: that Service alone is left as it was (its new backends given back),
        // the sync's others are completed, and the error is returned after them, so
        // that the next sync tries it again from what `written` still says.
        let mut failed = None;
        let mut kept = Vec::with_capacity(staged.len());
        for st in staged {
            if let Table::InPlace(values) = &st.4 {
                if let Err(e) = self.rewrite_table(st.1, values) {
                    tracing::warn!(service = %st.0.ip, error = %e, "cannot rewrite a Service's table; it keeps its backends until the next sync");
                    self.release(&st.2.backends);
                    failed = Some(e);
                    continue;
                }
                done.rewritten += 1;
            }
            kept.push(st);
        }
        // 4. The frontends, now that their tables are in place.
        for (key, id, front, slots, _) in kept {
            let entry = SvcEntry {
                id,
                backends: front.backends.len() as u32,
                flags: if front.affinity_s.is_some() {
                    SVC_AFFINITY
                } else {
                    0
                },
                affinity_s: front.affinity_s.unwrap_or(0),
            };
            self.frontends
                .insert(svc_key(&key), entry, 0)
                .map_err(map_err(map_names::SVC))?;
            done.frontends += 1;
            if let Some((_, old, _)) = self.written.insert(key, (id, front, slots)) {
                done.backends += self.release(&old.backends);
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// Before the first sync: the ids a previous daemon's pinned frontends and
    /// backends still hold cool before this writer hands them out (its first sync
    /// replaces every frontend, and a packet meanwhile follows the old ones). Read only
    /// when the previous daemon left frontends: the backends' array is read entry by
    /// entry (262,144 lookups, once a restart).
    fn reserve_pinned(&mut self) -> Result<(), DataplaneError> {
        let services: Vec<u32> = self
            .frontends
            .iter()
            .map(|r| r.map(|(_, e)| e.id))
            .collect::<Result<_, _>>()
            .map_err(map_err(map_names::SVC))?;
        if services.is_empty() {
            return Ok(());
        }
        let backends: Vec<u32> = self
            .backends
            .iter()
            .enumerate()
            .filter_map(|(id, b)| match b {
                Ok(b) if b.ip != 0 => Some(Ok(id as u32)),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()
            .map_err(map_err(map_names::SVC_BACKEND))?;
        tracing::debug!(
            services = services.len(),
            backends = backends.len(),
            "ids a previous daemon left cool before reuse"
        );
        self.service_ids.reserve(services);
        self.backend_slots.reserve(backends);
        Ok(())
    }

    /// The id of backend `b`, written when it is new; one more Service uses it.
    fn acquire(
        &mut self,
        b: (Ipv4Addr, u16),
        done: &mut ServiceSync,
    ) -> Result<u32, DataplaneError> {
        if let Some((id, users)) = self.backend_ids.get_mut(&b) {
            *users += 1;
            return Ok(*id);
        }
        let id = self.backend_slots.take()?;
        let entry = Backend {
            ip: u32::from_ne_bytes(b.0.octets()),
            port: b.1.to_be(),
            flags: if self.host_backends.contains(&b.0) {
                BACKEND_HOST
            } else if self.provider_backends.contains(&b.0) {
                BACKEND_PROVIDER
            } else {
                0
            },
        };
        self.backends
            .set(id, entry, 0)
            .map_err(map_err(map_names::SVC_BACKEND))?;
        self.backend_ids.insert(b, (id, 1));
        done.backends += 1;
        Ok(id)
    }

    /// One Service fewer uses each of `backends`; those no Service uses are forgotten
    /// (their slot stays written until reused: no table points at it).
    fn release(&mut self, backends: &[(Ipv4Addr, u16)]) -> usize {
        let mut freed = 0;
        for b in backends {
            if let Some((_, users)) = self.backend_ids.get_mut(b) {
                *users -= 1;
                if *users == 0 {
                    if let Some((id, _)) = self.backend_ids.remove(b) {
                        self.backend_slots.give_back(id);
                    }
                    freed += 1;
                }
            }
        }
        freed
    }

    /// A new Maglev table holding `slots` (backend ids), not yet pointed at.
    fn make_table(
        &mut self,
        id: u32,
        slots: impl Iterator<Item = u32>,
    ) -> Result<MapData, DataplaneError> {
        let name = super::pins::maglev_map_name(id);
        let obj = aya_obj::Map::new_from_params(
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_ARRAY as u32,
            4,
            4,
            MAGLEV_SLOTS,
            MAGLEV_FLAGS,
        );
        let inner = MapData::create(obj, &name, None).map_err(map_err(&name))?;
        let table: Vec<u32> = slots.collect();
        write_mapped(raw_fd(&inner), &table).map_err(|e| DataplaneError::Map {
            name: name.clone(),
            source: aya::maps::MapError::SyscallError(aya::sys::SyscallError {
                call: "mmap",
                io_error: e,
            }),
        })?;
        Ok(inner)
    }

    /// Writes `values` (a backend id per slot) over Service `id`'s table where it is:
    /// the array the outer map holds at `id`, opened by its kernel id and mapped.
    fn rewrite_table(&self, id: u32, values: &[u32]) -> Result<(), DataplaneError> {
        let name = map_names::SVC_MAGLEV;
        let fail = |call: &'static str, io_error: std::io::Error| DataplaneError::Map {
            name: name.to_owned(),
            source: aya::maps::MapError::SyscallError(aya::sys::SyscallError { call, io_error }),
        };
        let inner =
            lookup_u32(raw_fd(&self.tables), id).map_err(|e| fail("bpf_map_lookup_elem", e))?;
        let table = MapData::from_id(inner).map_err(map_err(name))?;
        write_mapped(raw_fd(&table), values).map_err(|e| fail("mmap", e))
    }

    /// Gives back what staged frontends took (a sync that fails midway).
    fn unstage(&mut self, staged: &[Staged]) {
        for (key, id, front, _, _) in staged {
            self.release(&front.backends);
            if !self.written.contains_key(key) {
                // Its id was new: nothing points at it.
                self.service_ids.unused(*id);
            }
        }
    }

    /// How this Node reaches backends through its stack (SVC-02): its Service
    /// device and source address. True when it changed.
    pub fn set_host(&mut self, cfg: SvcHost) -> Result<bool, DataplaneError> {
        if self.host_written == Some(cfg) {
            return Ok(false);
        }
        self.host
            .set(0, cfg, 0)
            .map_err(map_err(map_names::SVC_HOST))?;
        self.host_written = Some(cfg);
        Ok(true)
    }

    /// The frontends as written, with their ids (dumps and tests).
    pub fn frontends(&self) -> impl Iterator<Item = (&FrontendKey, u32, &Frontend)> {
        self.written.iter().map(|(k, (id, f, _))| (k, *id, f))
    }
}
