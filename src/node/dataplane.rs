//! The eBPF datapath of one Node: loads the embedded object, pins its maps, attaches
//! the programs to Juneau's own interfaces and writes their configuration.
//!
//! Order of writes is chosen so that no frame ever sees a half-configured port: a
//! segment's table and flood list exist before any port points at them, and a port is
//! deactivated before anything it uses is taken away.
use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, ArrayOfMaps, Map, MapData, MapError, PerCpuArray},
    programs::{ProgramError, SchedClassifier, TcAttachType, tc::SchedClassifierLinkId},
};
use juneau_common::{
    DropReason, FdbEntry, FdbKey, FloodList, PortConfig,
    l2::{FDB_ENTRIES, MAX_PORTS, PORT_ACTIVE, PORT_PEER},
    map_names, prog_names,
};

use super::{
    l2network::{L2Error, Segments},
    veth::{self, VethError},
};

#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    #[error("cannot load the eBPF object: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("eBPF program {name}: {source}")]
    Program {
        name: &'static str,
        source: ProgramError,
    },
    #[error("map {name}: {source}")]
    Map { name: String, source: MapError },
    #[error("the object has no {0}; the embedded eBPF build is out of date")]
    Missing(&'static str),
    #[error("cannot prepare the pin folder {path}: {source}")]
    PinDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "interface index {0} is beyond jn_l2_port ({MAX_PORTS} entries); recreate the interface or restart the Node's network namespace"
    )]
    IfindexTooLarge(u32),
    #[error(transparent)]
    Segment(#[from] L2Error),
    #[error(transparent)]
    Link(#[from] VethError),
}

fn map_err(name: &str) -> impl FnOnce(MapError) -> DataplaneError + '_ {
    move |source| DataplaneError::Map {
        name: name.to_owned(),
        source,
    }
}

/// A port to configure: a host-side interface and the segment it belongs to.
#[derive(Clone, Copy, Debug)]
pub struct PortSpec {
    pub ifindex: u32,
    pub vni: u32,
    /// Segment MTU (L2-21); 0 disables the check.
    pub mtu: u32,
    /// The interface is a veth whose peer is in another namespace (a Pod NIC).
    pub peer: bool,
}

pub struct Dataplane {
    ebpf: Ebpf,
    segments: Segments,
    /// Our handles on the per-segment learning tables, by slot.
    fdbs: HashMap<u32, MapData>,
    links: HashMap<u32, SchedClassifierLinkId>,
}

impl Dataplane {
    /// Loads the embedded programs. With `pin_dir`, every map is pinned there by name
    /// (and reused if already pinned, so that a restarted daemon keeps learned state).
    pub fn load(pin_dir: Option<&Path>) -> Result<Self, DataplaneError> {
        let mut loader = EbpfLoader::new();
        if let Some(dir) = pin_dir {
            ensure_bpffs(dir)?;
            for name in map_names::ALL {
                loader.map_pin_path(name, dir.join(name));
            }
        }
        let mut ebpf = loader.load(crate::EBPF_OBJECT)?;
        let prog: &mut SchedClassifier = ebpf
            .program_mut(prog_names::L2_PORT_INGRESS)
            .ok_or(DataplaneError::Missing(prog_names::L2_PORT_INGRESS))?
            .try_into()
            .map_err(|source| DataplaneError::Program {
                name: prog_names::L2_PORT_INGRESS,
                source,
            })?;
        prog.load().map_err(|source| DataplaneError::Program {
            name: prog_names::L2_PORT_INGRESS,
            source,
        })?;
        Ok(Self {
            ebpf,
            segments: Segments::default(),
            fdbs: HashMap::new(),
            links: HashMap::new(),
        })
    }

    /// The L2 port program, for test runs and statistics.
    pub fn l2_port_program(&self) -> &SchedClassifier {
        self.ebpf
            .program(prog_names::L2_PORT_INGRESS)
            .and_then(|p| p.try_into().ok())
            .expect("loaded in Dataplane::load")
    }

    fn map_mut(&mut self, name: &'static str) -> Result<&mut Map, DataplaneError> {
        self.ebpf.map_mut(name).ok_or(DataplaneError::Missing(name))
    }

    fn map(&self, name: &'static str) -> Result<&Map, DataplaneError> {
        self.ebpf.map(name).ok_or(DataplaneError::Missing(name))
    }

    /// Attaches the L2 program to `ifname` (in the calling thread's namespace) and
    /// configures it as a port. Refuses interfaces Juneau did not create (MX-02). On
    /// failure nothing stays attached or written.
    pub fn attach_port(&mut self, ifname: &str, spec: PortSpec) -> Result<(), DataplaneError> {
        let ifindex = veth::owned_ifindex(ifname)?;
        let spec = PortSpec { ifindex, ..spec };
        let prog: &mut SchedClassifier = self
            .ebpf
            .program_mut(prog_names::L2_PORT_INGRESS)
            .ok_or(DataplaneError::Missing(prog_names::L2_PORT_INGRESS))?
            .try_into()
            .map_err(|source| DataplaneError::Program {
                name: prog_names::L2_PORT_INGRESS,
                source,
            })?;
        let link = prog
            .attach(ifname, TcAttachType::Ingress)
            .map_err(|source| DataplaneError::Program {
                name: prog_names::L2_PORT_INGRESS,
                source,
            })?;
        if let Err(e) = self.configure_port(spec) {
            let _ = self.detach(link);
            return Err(e);
        }
        self.links.insert(ifindex, link);
        Ok(())
    }

    fn detach(&mut self, link: SchedClassifierLinkId) -> Result<(), DataplaneError> {
        let prog: &mut SchedClassifier = self
            .ebpf
            .program_mut(prog_names::L2_PORT_INGRESS)
            .ok_or(DataplaneError::Missing(prog_names::L2_PORT_INGRESS))?
            .try_into()
            .map_err(|source| DataplaneError::Program {
                name: prog_names::L2_PORT_INGRESS,
                source,
            })?;
        prog.detach(link).map_err(|source| DataplaneError::Program {
            name: prog_names::L2_PORT_INGRESS,
            source,
        })
    }

    /// Writes a port's configuration (no attachment): the segment's table and flood
    /// list first, the port entry last.
    pub fn configure_port(&mut self, spec: PortSpec) -> Result<(), DataplaneError> {
        if spec.ifindex >= MAX_PORTS {
            return Err(DataplaneError::IfindexTooLarge(spec.ifindex));
        }
        let flags = PORT_ACTIVE | if spec.peer { PORT_PEER } else { 0 };
        let change = self.segments.add_port(spec.vni, spec.ifindex, flags)?;
        let written = (|| {
            if change.segment_edge {
                self.create_fdb(change.vni, change.slot)?;
            }
            self.write_flood_list(change.vni, change.slot)?;
            let config = PortConfig {
                vni: spec.vni,
                segment: change.slot,
                flags,
                mtu: spec.mtu,
                ..Default::default()
            };
            let mut ports: Array<_, PortConfig> =
                Array::try_from(self.map_mut(map_names::L2_PORT)?)
                    .map_err(map_err(map_names::L2_PORT))?;
            ports
                .set(spec.ifindex, config, 0)
                .map_err(map_err(map_names::L2_PORT))
        })();
        if written.is_err() {
            // Roll the bookkeeping back; the maps were written in an order that leaves
            // no port pointing at anything half-made.
            if let Some(undo) = self.segments.remove_port(spec.ifindex) {
                if undo.segment_edge {
                    self.fdbs.remove(&undo.slot);
                } else {
                    let _ = self.write_flood_list(undo.vni, undo.slot);
                }
            }
        }
        written
    }

    /// Detaches (when attached) and unconfigures a port. Removing a port that is not
    /// one succeeds (idempotent).
    pub fn remove_port(&mut self, ifindex: u32) -> Result<(), DataplaneError> {
        if let Some(link) = self.links.remove(&ifindex) {
            // The interface may be gone already, which detached us.
            let _ = self.detach(link);
        }
        let Some(change) = self.segments.remove_port(ifindex) else {
            return Ok(());
        };
        let mut ports: Array<_, PortConfig> = Array::try_from(self.map_mut(map_names::L2_PORT)?)
            .map_err(map_err(map_names::L2_PORT))?;
        ports
            .set(ifindex, PortConfig::default(), 0)
            .map_err(map_err(map_names::L2_PORT))?;
        if change.segment_edge {
            self.fdbs.remove(&change.slot);
        } else {
            self.write_flood_list(change.vni, change.slot)?;
            self.forget_port(change.slot, ifindex)?;
        }
        Ok(())
    }

    fn create_fdb(&mut self, vni: u32, slot: u32) -> Result<(), DataplaneError> {
        let name = format!("jn_fdb_{vni}");
        let obj = aya_obj::Map::new_from_params(
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_LRU_HASH as u32,
            size_of::<FdbKey>() as u32,
            size_of::<FdbEntry>() as u32,
            FDB_ENTRIES,
            0,
        );
        let inner = MapData::create(obj, &name, None).map_err(map_err(&name))?;
        let mut outer: ArrayOfMaps<_, MapData> =
            ArrayOfMaps::try_from(self.map_mut(map_names::L2_FDB)?)
                .map_err(map_err(map_names::L2_FDB))?;
        outer
            .set(slot, &inner, 0)
            .map_err(map_err(map_names::L2_FDB))?;
        self.fdbs.insert(slot, inner);
        Ok(())
    }

    fn write_flood_list(&mut self, vni: u32, slot: u32) -> Result<(), DataplaneError> {
        let list = self
            .segments
            .get(vni)
            .map(|s| s.flood_list())
            .unwrap_or_default();
        let mut lists: Array<_, FloodList> = Array::try_from(self.map_mut(map_names::L2_FLOOD)?)
            .map_err(map_err(map_names::L2_FLOOD))?;
        lists
            .set(slot, list, 0)
            .map_err(map_err(map_names::L2_FLOOD))
    }

    /// Deletes learned entries that point at a removed port, so that its MACs are
    /// flooded (and relearned wherever they reappear) instead of sent into the void.
    fn forget_port(&mut self, slot: u32, ifindex: u32) -> Result<(), DataplaneError> {
        let Some(table) = self.fdbs.get(&slot) else {
            return Ok(());
        };
        let stale: Vec<FdbKey> = read_fdb(table)?
            .into_iter()
            .filter(|(_, e)| e.ifindex == ifindex)
            .map(|(k, _)| k)
            .collect();
        let mut map = aya::maps::HashMap::<_, FdbKey, FdbEntry>::try_from(Map::LruHashMap(
            MapData::from_id(table.info().map_err(map_err("jn_fdb"))?.id())
                .map_err(map_err("jn_fdb"))?,
        ))
        .map_err(map_err("jn_fdb"))?;
        for key in stale {
            let _ = map.remove(&key);
        }
        Ok(())
    }

    /// The learned table of a segment (empty when this Node has no port on it).
    pub fn fdb(&self, vni: u32) -> Result<Vec<(FdbKey, FdbEntry)>, DataplaneError> {
        match self.segments.get(vni).and_then(|s| self.fdbs.get(&s.slot)) {
            Some(table) => read_fdb(table),
            None => Ok(Vec::new()),
        }
    }

    /// The port configuration the datapath sees (including its learning cache).
    pub fn port(&self, ifindex: u32) -> Result<PortConfig, DataplaneError> {
        let ports: Array<_, PortConfig> =
            Array::try_from(self.map(map_names::L2_PORT)?).map_err(map_err(map_names::L2_PORT))?;
        ports.get(&ifindex, 0).map_err(map_err(map_names::L2_PORT))
    }

    /// Drop counters summed over CPUs, by reason.
    pub fn drops(&self) -> Result<BTreeMap<&'static str, u64>, DataplaneError> {
        let counters: PerCpuArray<_, u64> = PerCpuArray::try_from(self.map(map_names::DROPS)?)
            .map_err(map_err(map_names::DROPS))?;
        DropReason::ALL
            .iter()
            .map(|r| {
                let per_cpu = counters
                    .get(&(*r as u32), 0)
                    .map_err(map_err(map_names::DROPS))?;
                Ok((r.name(), per_cpu.iter().sum()))
            })
            .collect()
    }
}

/// Every entry of one learning table.
pub fn read_fdb(table: &MapData) -> Result<Vec<(FdbKey, FdbEntry)>, DataplaneError> {
    let id = table.info().map_err(map_err("jn_fdb"))?.id();
    let map = Map::LruHashMap(MapData::from_id(id).map_err(map_err("jn_fdb"))?);
    let hash =
        aya::maps::HashMap::<_, FdbKey, FdbEntry>::try_from(&map).map_err(map_err("jn_fdb"))?;
    hash.iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(map_err("jn_fdb"))
}

/// Pinning needs a bpffs at /sys/fs/bpf; a fresh machine may not have it mounted.
fn ensure_bpffs(dir: &Path) -> Result<(), DataplaneError> {
    let root = Path::new("/sys/fs/bpf");
    let mounted = std::fs::read_to_string("/proc/self/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf") && l.contains(" bpf "))
        })
        .unwrap_or(false);
    if !mounted {
        nix::mount::mount(
            Some("bpf"),
            root,
            Some("bpf"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| DataplaneError::PinDir {
            path: root.to_owned(),
            source: e.into(),
        })?;
    }
    std::fs::create_dir_all(dir).map_err(|source| DataplaneError::PinDir {
        path: dir.to_owned(),
        source,
    })
}
