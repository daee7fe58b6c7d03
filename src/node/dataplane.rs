//! The eBPF datapath of one Node: loads the embedded object, pins its maps, attaches
//! the programs to Juneau's own interfaces and writes their configuration.
//!
//! Order of writes is chosen so that no frame ever sees a half-configured port: a
//! segment's table and lists exist before any port (or VNI entry) points at them, and
//! a port is deactivated before anything it uses is taken away.
use std::{
    collections::{BTreeMap, HashMap},
    net::Ipv4Addr,
    path::{Path, PathBuf},
    time::Duration,
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, ArrayOfMaps, HashMap as BpfHashMap, Map, MapData, MapError, PerCpuArray},
    programs::{ProgramError, SchedClassifier, TcAttachType, tc::SchedClassifierLinkId},
};
use juneau_common::{
    DropReason, FdbEntry, FdbKey, FloodList, NodeConfig, PortConfig, RemoteList,
    l2::{FDB_ENTRIES, MAX_PORTS, PORT_ACTIVE, PORT_PEER},
    map_names, prog_names,
};

use super::{
    l2network::{L2Error, Segments},
    netlink::{self, NetlinkError},
    veth, vxlan,
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
    Link(#[from] NetlinkError),
    #[error("the underlay can be attached only after the overlay (attach_overlay first)")]
    NoOverlay,
}

fn map_err(name: &str) -> impl FnOnce(MapError) -> DataplaneError + '_ {
    move |source| DataplaneError::Map {
        name: name.to_owned(),
        source,
    }
}

fn prog_err(name: &'static str) -> impl FnOnce(ProgramError) -> DataplaneError {
    move |source| DataplaneError::Program { name, source }
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

const PROGRAMS: [&str; 3] = [
    prog_names::L2_PORT_INGRESS,
    prog_names::L2_VXLAN_INGRESS,
    prog_names::L2_UNDERLAY_INGRESS,
];

pub struct Dataplane {
    ebpf: Ebpf,
    segments: Segments,
    /// Our handles on the per-segment learning tables, by slot.
    fdbs: HashMap<u32, MapData>,
    links: HashMap<u32, (&'static str, SchedClassifierLinkId)>,
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
        let ebpf = loader.load(crate::EBPF_OBJECT)?;
        let mut dp = Self {
            ebpf,
            segments: Segments::default(),
            fdbs: HashMap::new(),
            links: HashMap::new(),
        };
        for name in PROGRAMS {
            dp.program_mut(name)?.load().map_err(prog_err(name))?;
        }
        Ok(dp)
    }

    fn program_mut(&mut self, name: &'static str) -> Result<&mut SchedClassifier, DataplaneError> {
        self.ebpf
            .program_mut(name)
            .ok_or(DataplaneError::Missing(name))?
            .try_into()
            .map_err(prog_err(name))
    }

    /// A loaded program, for test runs and statistics.
    pub fn program(&self, name: &'static str) -> &SchedClassifier {
        self.ebpf
            .program(name)
            .and_then(|p| p.try_into().ok())
            .expect("every program is loaded in Dataplane::load")
    }

    /// The program of Pod ports.
    pub fn l2_port_program(&self) -> &SchedClassifier {
        self.program(prog_names::L2_PORT_INGRESS)
    }

    fn map_mut(&mut self, name: &'static str) -> Result<&mut Map, DataplaneError> {
        self.ebpf.map_mut(name).ok_or(DataplaneError::Missing(name))
    }

    fn map(&self, name: &'static str) -> Result<&Map, DataplaneError> {
        self.ebpf.map(name).ok_or(DataplaneError::Missing(name))
    }

    fn attach(
        &mut self,
        prog: &'static str,
        ifname: &str,
    ) -> Result<SchedClassifierLinkId, DataplaneError> {
        self.program_mut(prog)?
            .attach(ifname, TcAttachType::Ingress)
            .map_err(prog_err(prog))
    }

    fn detach(
        &mut self,
        prog: &'static str,
        link: SchedClassifierLinkId,
    ) -> Result<(), DataplaneError> {
        self.program_mut(prog)?.detach(link).map_err(prog_err(prog))
    }

    /// Attaches the L2 program to `ifname` (in the calling thread's namespace) and
    /// configures it as a port. Refuses interfaces Juneau did not create (MX-02). On
    /// failure nothing stays attached or written.
    pub fn attach_port(&mut self, ifname: &str, spec: PortSpec) -> Result<u32, DataplaneError> {
        let ifindex = netlink::owned_ifindex(ifname, veth::OWNER_ALIAS)?;
        let spec = PortSpec { ifindex, ..spec };
        let link = self.attach(prog_names::L2_PORT_INGRESS, ifname)?;
        if let Err(e) = self.configure_port(spec) {
            let _ = self.detach(prog_names::L2_PORT_INGRESS, link);
            return Err(e);
        }
        self.links
            .insert(ifindex, (prog_names::L2_PORT_INGRESS, link));
        Ok(ifindex)
    }

    /// Attaches the overlay program to the Node's VXLAN device (made by
    /// [`vxlan::create`]) and records it as the way to other Nodes.
    pub fn attach_overlay(
        &mut self,
        ifname: &str,
        local_vtep: Ipv4Addr,
    ) -> Result<u32, DataplaneError> {
        let ifindex = netlink::owned_ifindex(ifname, vxlan::OWNER_ALIAS)?;
        let config = NodeConfig {
            vxlan_ifindex: ifindex,
            local_vtep: local_vtep.to_bits(),
            ..Default::default()
        };
        self.attach_node_program(prog_names::L2_VXLAN_INGRESS, ifname, ifindex, config)
    }

    /// Attaches the decapsulation program to the underlay NIC the VXLAN device sends by
    /// and turns on the datapath's own VXLAN encapsulation for known unicast IPv4 (see
    /// the eBPF `l2::encap`). Call after [`Dataplane::attach_overlay`]; without it every
    /// frame between Nodes goes through the VXLAN device. The program passes everything
    /// but VXLAN frames for local Pods to the stack untouched.
    pub fn attach_underlay(&mut self, ifname: &str) -> Result<u32, DataplaneError> {
        let ifindex = netlink::ifindex(ifname)?;
        let config = self.node_config()?;
        if config.vxlan_ifindex == 0 {
            return Err(DataplaneError::NoOverlay);
        }
        let config = NodeConfig {
            underlay_ifindex: ifindex,
            ..config
        };
        self.attach_node_program(prog_names::L2_UNDERLAY_INGRESS, ifname, ifindex, config)
    }

    /// Turns the datapath's own encapsulation off again (every frame between Nodes by
    /// the VXLAN device) and detaches the underlay program. Idempotent.
    pub fn detach_underlay(&mut self) -> Result<(), DataplaneError> {
        let config = self.node_config()?;
        if config.underlay_ifindex == 0 {
            return Ok(());
        }
        self.set_node_config(NodeConfig {
            underlay_ifindex: 0,
            ..config
        })?;
        if let Some((prog, link)) = self.links.remove(&config.underlay_ifindex) {
            let _ = self.detach(prog, link);
        }
        Ok(())
    }

    /// Attaches `prog` to a Node-level interface and writes `config` to `jn_node`; on
    /// failure the program is detached again, so nothing is half-applied.
    fn attach_node_program(
        &mut self,
        prog: &'static str,
        ifname: &str,
        ifindex: u32,
        config: NodeConfig,
    ) -> Result<u32, DataplaneError> {
        let link = self.attach(prog, ifname)?;
        if let Err(e) = self.set_node_config(config) {
            let _ = self.detach(prog, link);
            return Err(e);
        }
        self.links.insert(ifindex, (prog, link));
        Ok(ifindex)
    }

    fn node_config(&self) -> Result<NodeConfig, DataplaneError> {
        Array::try_from(self.map(map_names::NODE)?)
            .and_then(|node: Array<_, NodeConfig>| node.get(&0, 0))
            .map_err(map_err(map_names::NODE))
    }

    fn set_node_config(&mut self, config: NodeConfig) -> Result<(), DataplaneError> {
        Array::try_from(self.map_mut(map_names::NODE)?)
            .and_then(|mut node: Array<_, NodeConfig>| node.set(0, config, 0))
            .map_err(map_err(map_names::NODE))
    }

    /// Writes a port's configuration (no attachment): the segment's table and lists
    /// first, the port entry last.
    pub fn configure_port(&mut self, spec: PortSpec) -> Result<(), DataplaneError> {
        if spec.ifindex >= MAX_PORTS {
            return Err(DataplaneError::IfindexTooLarge(spec.ifindex));
        }
        let flags = PORT_ACTIVE | if spec.peer { PORT_PEER } else { 0 };
        let change = self.segments.add_port(spec.vni, spec.ifindex, flags)?;
        let written = (|| {
            if change.segment_edge {
                self.create_fdb(change.vni, change.slot)?;
                self.write_remote_list(change.vni)?;
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
                .map_err(map_err(map_names::L2_PORT))?;
            if change.segment_edge {
                let mut vnis: BpfHashMap<_, u32, u32> =
                    BpfHashMap::try_from(self.map_mut(map_names::L2_VNI)?)
                        .map_err(map_err(map_names::L2_VNI))?;
                vnis.insert(change.vni, change.slot, 0)
                    .map_err(map_err(map_names::L2_VNI))?;
            }
            Ok(())
        })();
        if written.is_err() {
            // Roll back: deactivate the port, then forget what was made for it.
            let _ = self.unconfigure_port(spec.ifindex);
        }
        written
    }

    /// Detaches (when attached) and unconfigures a port. Removing a port that is not
    /// one succeeds (idempotent).
    pub fn remove_port(&mut self, ifindex: u32) -> Result<(), DataplaneError> {
        if let Some((prog, link)) = self.links.remove(&ifindex) {
            // The interface may be gone already, which detached us.
            let _ = self.detach(prog, link);
        }
        self.unconfigure_port(ifindex)
    }

    fn unconfigure_port(&mut self, ifindex: u32) -> Result<(), DataplaneError> {
        let Some(change) = self.segments.remove_port(ifindex) else {
            return Ok(());
        };
        let mut ports: Array<_, PortConfig> = Array::try_from(self.map_mut(map_names::L2_PORT)?)
            .map_err(map_err(map_names::L2_PORT))?;
        ports
            .set(ifindex, PortConfig::default(), 0)
            .map_err(map_err(map_names::L2_PORT))?;
        if change.segment_edge {
            // The overlay stops delivering to the segment before its table goes.
            let mut vnis: BpfHashMap<_, u32, u32> =
                BpfHashMap::try_from(self.map_mut(map_names::L2_VNI)?)
                    .map_err(map_err(map_names::L2_VNI))?;
            let _ = vnis.remove(&change.vni);
            self.fdbs.remove(&change.slot);
        } else {
            self.write_flood_list(change.vni, change.slot)?;
            self.forget(change.vni, |e| e.ifindex == ifindex)?;
        }
        Ok(())
    }

    /// One more endpoint of segment `vni` lives on the Node `vtep`.
    pub fn add_remote(&mut self, vni: u32, vtep: Ipv4Addr) -> Result<(), DataplaneError> {
        if self.segments.add_remote(vni, vtep.to_bits())? {
            self.write_remote_list(vni)?;
        }
        Ok(())
    }

    /// Many endpoints at once: the bookkeeping first, then one write per segment whose
    /// remote list changed (a map update costs ~1.5 us; 10,000 endpoints over 100
    /// segments are 100 writes, not 10,000).
    pub fn add_remotes(&mut self, endpoints: &[(u32, Ipv4Addr)]) -> Result<(), DataplaneError> {
        let mut changed = std::collections::BTreeSet::new();
        for (vni, vtep) in endpoints {
            if self.segments.add_remote(*vni, vtep.to_bits())? {
                changed.insert(*vni);
            }
        }
        for vni in changed {
            self.write_remote_list(vni)?;
        }
        Ok(())
    }

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

    /// One endpoint of segment `vni` on the Node `vtep` is gone. When it was the last
    /// one, the Node leaves the segment's remote list and its learned MACs are dropped.
    pub fn remove_remote(&mut self, vni: u32, vtep: Ipv4Addr) -> Result<(), DataplaneError> {
        if self.segments.remove_remote(vni, vtep.to_bits()) {
            self.write_remote_list(vni)?;
            self.forget(vni, |e| e.vtep == vtep.to_bits())?;
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

    /// Writes the remote list of `vni` into its slot, if this Node has the segment.
    fn write_remote_list(&mut self, vni: u32) -> Result<(), DataplaneError> {
        let Some(slot) = self.segments.get(vni).map(|s| s.slot) else {
            return Ok(());
        };
        let list = self.segments.remote_list(vni);
        let mut lists: Array<_, RemoteList> = Array::try_from(self.map_mut(map_names::L2_REMOTE)?)
            .map_err(map_err(map_names::L2_REMOTE))?;
        lists
            .set(slot, list, 0)
            .map_err(map_err(map_names::L2_REMOTE))
    }

    /// Deletes the learned entries of `vni` that match (a removed port, a Node that left):
    /// their MACs are flooded, and relearned wherever they reappear.
    fn forget(
        &mut self,
        vni: u32,
        stale: impl Fn(&FdbEntry) -> bool,
    ) -> Result<usize, DataplaneError> {
        let Some(table) = self.segments.get(vni).and_then(|s| self.fdbs.get(&s.slot)) else {
            return Ok(0);
        };
        let mut map = open_fdb(table)?;
        let keys: Vec<FdbKey> = map
            .iter()
            .filter_map(|r| r.ok())
            .filter(|(_, e)| stale(e))
            .map(|(k, _)| k)
            .collect();
        for key in &keys {
            let _ = map.remove(key);
        }
        Ok(keys.len())
    }

    /// Ages every learning table: entries not refreshed for `max_age` are deleted
    /// (L2-30). The clock is the datapath's (CLOCK_MONOTONIC_COARSE), never wall time.
    pub fn age(&mut self, max_age: Duration) -> Result<usize, DataplaneError> {
        let now = monotonic_coarse_ns();
        let max = max_age.as_nanos() as u64;
        let vnis: Vec<u32> = self.segments.vnis().collect();
        let mut removed = 0;
        for vni in vnis {
            removed += self.forget(vni, |e| now.saturating_sub(e.last_seen_ns) > max)?;
        }
        Ok(removed)
    }

    /// The learned table of a segment (empty when this Node has no port on it).
    pub fn fdb(&self, vni: u32) -> Result<Vec<(FdbKey, FdbEntry)>, DataplaneError> {
        match self.segments.get(vni).and_then(|s| self.fdbs.get(&s.slot)) {
            Some(table) => open_fdb(table)?
                .iter()
                .collect::<Result<Vec<_>, _>>()
                .map_err(map_err("jn_fdb")),
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

/// A second handle on a learning table, typed for reading and deleting.
fn open_fdb(table: &MapData) -> Result<BpfHashMap<MapData, FdbKey, FdbEntry>, DataplaneError> {
    let id = table.info().map_err(map_err("jn_fdb"))?.id();
    let data = MapData::from_id(id).map_err(map_err("jn_fdb"))?;
    BpfHashMap::try_from(Map::LruHashMap(data)).map_err(map_err("jn_fdb"))
}

/// CLOCK_MONOTONIC_COARSE in ns: the clock of `bpf_ktime_get_coarse_ns`.
pub fn monotonic_coarse_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE)
        .expect("clock_gettime");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
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
