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

use aya::maps::{Array, HashMap as BpfHashMap, MapData};
use juneau_common::{
    map_names,
    svc::{
        BACKEND_HOST, BACKEND_PROVIDER, Backend, MAGLEV_FLAGS, MAGLEV_SLOTS, MAX_BACKENDS,
        MAX_SERVICES, SVC_AFFINITY, SvcEntry, SvcHost, SvcKey,
    },
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
    /// `jn_svc_maglev` (written by batches only).
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

/// A frontend staged by a sync: key, id, what it wants, its table's slots (indices
/// into its backends) and the new table (none without backends).
type Staged = (FrontendKey, u32, Frontend, Vec<u32>, Option<MapData>);

fn raw_fd(map: &MapData) -> u32 {
    use std::os::fd::{AsFd, AsRawFd};
    map.fd().as_fd().as_raw_fd() as u32
}

/// Writes `values` into the mmapable array `fd` (a new Maglev table, not yet pointed
/// at) through a shared mapping of its values: one copy instead of a kernel update per
/// slot. An mmapable array keeps each value in 8 bytes (its element size rounded up).
fn write_mapped(fd: u32, values: &[u32]) -> std::io::Result<()> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let len = (values.len() * 8).next_multiple_of(page);
    // SAFETY: a shared mapping of the map's value area, as the kernel offers it for a
    // BPF_F_MMAPABLE array; checked for failure below.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd as i32,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `len` bytes are mapped at `at`, page-aligned; `values.len()` slots of 8
    // bytes fit in them, each value in its slot's first 4 bytes.
    unsafe {
        let slots = at.cast::<u8>();
        for (i, v) in values.iter().enumerate() {
            slots.add(i * 8).cast::<u32>().write(*v);
        }
        libc::munmap(at, len);
    }
    Ok(())
}

fn batch_err(name: &str, e: std::io::Error) -> DataplaneError {
    DataplaneError::Map {
        name: name.to_owned(),
        source: aya::maps::MapError::SyscallError(aya::sys::SyscallError {
            call: "bpf_map_update_batch",
            io_error: e,
        }),
    }
}

/// `values[i]` at `keys[i]` of the map `fd`, in one `BPF_MAP_UPDATE_BATCH` (4-byte keys
/// and values: a Maglev table's slots, or a map of maps' inner map fds). One syscall
/// instead of one per entry, and for a map of maps one wait for running programs
/// instead of one per entry (~7 ms each here).
fn batch_update(fd: u32, keys: &[u32], values: &[u32]) -> std::io::Result<()> {
    /// `union bpf_attr`'s `batch` member.
    #[repr(C)]
    struct BatchAttr {
        in_batch: u64,
        out_batch: u64,
        keys: u64,
        values: u64,
        count: u32,
        map_fd: u32,
        elem_flags: u64,
        flags: u64,
    }
    const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
    assert_eq!(keys.len(), values.len());
    if keys.is_empty() {
        return Ok(());
    }
    let mut attr = BatchAttr {
        in_batch: 0,
        out_batch: 0,
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: keys.len() as u32,
        map_fd: fd,
        elem_flags: 0,
        flags: 0,
    };
    // SAFETY: the attribute points at `keys` and `values`, both alive for the call and
    // `count` long; the kernel reads them and writes only `count` back.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_BATCH,
            &mut attr as *mut BatchAttr,
            size_of::<BatchAttr>() as u32,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if attr.count as usize != keys.len() {
        return Err(std::io::Error::other(format!(
            "{} of {} entries written",
            attr.count,
            keys.len()
        )));
    }
    Ok(())
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

/// Ids `1..max`, handed out lowest first and taken back when freed (O(log n) each).
#[derive(Debug)]
struct Ids {
    free: BTreeSet<u32>,
    next: u32,
    max: u32,
    what: &'static str,
}

impl Ids {
    fn new(max: u32, what: &'static str) -> Self {
        Self {
            free: BTreeSet::new(),
            next: 1,
            max,
            what,
        }
    }

    fn take(&mut self) -> Result<u32, DataplaneError> {
        if let Some(id) = self.free.pop_first() {
            return Ok(id);
        }
        if self.next >= self.max {
            return Err(DataplaneError::Full(self.what, self.max));
        }
        self.next += 1;
        Ok(self.next - 1)
    }

    fn give_back(&mut self, id: u32) {
        self.free.insert(id);
    }
}

impl ServiceWriter {
    /// Brings the maps to `want`.
    pub fn sync(&mut self, want: &ServiceState) -> Result<ServiceSync, DataplaneError> {
        let mut done = ServiceSync::default();
        self.host_backends = want.host_backends.clone();
        self.provider_backends = want.provider_backends.clone();
        if !self.synced {
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
            let table = if slots.is_empty() {
                None
            } else {
                match self.make_table(id, slots.iter().map(|i| ids[*i as usize])) {
                    Ok(t) => Some(t),
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
        //    per update of a map of maps: once, not once per Service).
        let tables: Vec<(u32, &MapData)> = staged
            .iter()
            .filter_map(|(_, id, _, _, t)| t.as_ref().map(|t| (*id, t)))
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
        // 4. The frontends, now that their tables are in place.
        for (key, id, front, slots, _) in staged {
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
        let name = format!("jn_mg_{id}");
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

    /// Gives back what staged frontends took (a sync that fails midway).
    fn unstage(&mut self, staged: &[Staged]) {
        for (key, id, front, _, _) in staged {
            self.release(&front.backends);
            if !self.written.contains_key(key) {
                // Its id was new: nothing points at it.
                self.service_ids.give_back(*id);
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
