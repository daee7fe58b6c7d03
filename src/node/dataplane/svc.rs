//! The Services' map writer: frontends (`jn_svc`), backends (`jn_svc_backend`) and one
//! Maglev table per Service (`jn_svc_maglev`, an inner array each). It owns those maps
//! (taken by [`Dataplane::take_services`]), so the Services feature writes them under
//! its own lock.
//!
//! Order, so that no packet sees half a change: a Service's backends are written
//! before its table, its table (a new inner array, swapped in whole) before its
//! frontend; a frontend goes before its table and the backends only it used. Ids are
//! stable: a Service keeps its id while it exists (its connections name it), a backend
//! its id while any Service uses it.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use aya::maps::{Array, ArrayOfMaps, HashMap as BpfHashMap, Map, MapData};
use juneau_common::{
    map_names,
    svc::{Backend, MAGLEV_SLOTS, MAX_BACKENDS, MAX_SERVICES, SVC_AFFINITY, SvcEntry, SvcKey},
};

use super::{Dataplane, DataplaneError, map_err};
use crate::node::services::{Frontend, FrontendKey, ServiceState, maglev};

/// What one sync changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceSync {
    pub frontends: usize,
    pub backends: usize,
    pub tables: usize,
}

/// The Services' maps and the record of what they hold.
pub struct ServiceWriter {
    frontends: BpfHashMap<MapData, SvcKey, SvcEntry>,
    backends: Array<MapData, Backend>,
    tables: ArrayOfMaps<MapData, MapData>,
    /// Frontend -> (id, what was written for it, its Maglev table as indices into the
    /// frontend's backends): a change of backends is applied to the table written.
    written: BTreeMap<FrontendKey, (u32, Frontend, Vec<u32>)>,
    /// Backend -> (id, Services using it).
    backend_ids: BTreeMap<(Ipv4Addr, u16), (u32, usize)>,
}

impl Dataplane {
    /// Hands the Services' maps to their writer.
    pub fn take_services(&mut self) -> Result<ServiceWriter, DataplaneError> {
        Ok(ServiceWriter {
            frontends: self.take_map(map_names::SVC)?,
            backends: self.take_map(map_names::SVC_BACKEND)?,
            tables: self.take_map(map_names::SVC_MAGLEV)?,
            written: BTreeMap::new(),
            backend_ids: BTreeMap::new(),
        })
    }
}

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

/// The smallest id in `1..max` that `used` does not hold.
fn free_id(
    used: impl Iterator<Item = u32>,
    max: u32,
    what: &'static str,
) -> Result<u32, DataplaneError> {
    let used: BTreeSet<u32> = used.collect();
    (1..max)
        .find(|i| !used.contains(i))
        .ok_or(DataplaneError::Full(what, max))
}

impl ServiceWriter {
    /// Brings the maps to `want`.
    pub fn sync(&mut self, want: &ServiceState) -> Result<ServiceSync, DataplaneError> {
        let mut done = ServiceSync::default();
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
            let _ = id;
            done.backends += self.release(&old.backends);
        }
        for (key, front) in &want.frontends {
            if self.written.get(key).is_some_and(|(_, f, _)| f == front) {
                continue;
            }
            let id = match self.written.get(key) {
                Some((id, _, _)) => *id,
                None => free_id(
                    self.written.values().map(|(i, _, _)| *i),
                    MAX_SERVICES,
                    "Services",
                )?,
            };
            // 1. Backends (new ones get ids).
            let mut ids = Vec::with_capacity(front.backends.len());
            for b in &front.backends {
                ids.push(self.acquire(*b, &mut done)?);
            }
            // 2. The table, built aside and swapped in: from the one written before
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
            if !slots.is_empty() {
                self.write_table(id, slots.iter().map(|i| ids[*i as usize]))?;
                done.tables += 1;
            }
            // 3. The frontend.
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
                .insert(svc_key(key), entry, 0)
                .map_err(map_err(map_names::SVC))?;
            done.frontends += 1;
            if let Some((_, old, _)) = self.written.insert(*key, (id, front.clone(), slots)) {
                done.backends += self.release(&old.backends);
            }
        }
        Ok(done)
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
        let id = free_id(
            self.backend_ids.values().map(|(i, _)| *i),
            MAX_BACKENDS,
            "Service backends",
        )?;
        let entry = Backend {
            ip: u32::from_ne_bytes(b.0.octets()),
            port: b.1.to_be(),
            pad: 0,
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
                    self.backend_ids.remove(b);
                    freed += 1;
                }
            }
        }
        freed
    }

    fn write_table(
        &mut self,
        id: u32,
        slots: impl Iterator<Item = u32>,
    ) -> Result<(), DataplaneError> {
        let name = format!("jn_mg_{id}");
        let obj = aya_obj::Map::new_from_params(
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_ARRAY as u32,
            4,
            4,
            MAGLEV_SLOTS,
            0,
        );
        let inner = MapData::create(obj, &name, None).map_err(map_err(&name))?;
        {
            let info = inner.info().map_err(map_err(&name))?;
            let data = MapData::from_id(info.id()).map_err(map_err(&name))?;
            let mut table: Array<_, u32> =
                Array::try_from(Map::Array(data)).map_err(map_err(&name))?;
            for (slot, backend) in slots.enumerate() {
                table.set(slot as u32, backend, 0).map_err(map_err(&name))?;
            }
        }
        self.tables
            .set(id, &inner, 0)
            .map_err(map_err(map_names::SVC_MAGLEV))
    }

    /// The frontends as written, with their ids (dumps and tests).
    pub fn frontends(&self) -> impl Iterator<Item = (&FrontendKey, u32, &Frontend)> {
        self.written.iter().map(|(k, (id, f, _))| (k, *id, f))
    }
}
