//! The eBPF datapath of one Node: loads the embedded object, pins its maps and links,
//! adopts what a previous daemon left, attaches the programs to Juneau's own
//! interfaces. What each feature writes into the maps lives beside it: `l2` (ports,
//! learning tables, flood lists), `overlay` (the Node's VXLAN and underlay, remote
//! lists), `counters` (drops, memory).
//!
//! Order of writes is chosen so that no frame ever sees a half-configured port: a
//! segment's table and lists exist before any port (or VNI entry) points at them, and
//! a port is deactivated before anything it uses is taken away.
mod adopt;
mod counters;
mod ct;
mod eip;
mod ext_pools;
mod filter;
mod gw;
mod ids;
mod l2;
mod listen;
mod overlay;
pub mod pins;
mod policy;
mod ports_gw;
mod ports_public;
mod raw;
mod svc;
mod svc_host;
mod whole;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Map, MapData, MapError},
    programs::{
        ProgramError, SchedClassifier, TcAttachType,
        links::{FdLink, Link},
        tc::{SchedClassifierLink, SchedClassifierLinkId},
    },
};
pub use counters::run_stats;
pub use ct::Conntrack;
pub use eip::{ElasticIpWriter, Holder};
pub use ext_pools::{Delivery, ExtPoolWriter, prefix_of};
pub use filter::{PORT_FILTER_HANDLE, PORT_FILTER_PRIORITY, PortAttach};
pub use gw::{RouterSync, RouterWriter};
use juneau_common::{l2::MAX_PORTS, map_names, prog_names};
pub use l2::{PortKind, PortSpec, monotonic_coarse_ns};
pub use pins::PinLayout;
pub use policy::{PolicySync, PolicyWriter};
pub use ports_gw::{Gateway, ServedSegments};
pub use ports_public::PublicAddresses;
pub use svc::{ServiceSync, ServiceWriter};
pub use whole::Whole;

use super::{
    l2network::{L2Error, Segments},
    netlink::NetlinkError,
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
    #[error("cannot pin the link of {prog} on interface {ifindex}: {cause}")]
    PinLink {
        prog: &'static str,
        ifindex: u32,
        cause: String,
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
    #[error(
        "this Node already holds {0} RouteTables (the size of jn_gw_rt); remove RouteTables or gateways of unused Vpcs"
    )]
    RouteTables(u32),
    #[error(
        "RouteTable {table} has {routes} routes, more than the {max} a table holds; merge its routes into shorter prefixes",
        max = juneau_common::gw::ROUTES_PER_TABLE
    )]
    TooManyRoutes { table: String, routes: usize },
    #[error("no free id among {1} {0}: remove some, or raise the limit in juneau_common")]
    Full(&'static str, u32),
    #[error(
        "segment slot {0} has no learning table (an earlier write failed midway); delete the Pod's NIC and add it again"
    )]
    NoTable(u32),
}

fn map_err(name: &str) -> impl FnOnce(MapError) -> DataplaneError + '_ {
    move |source| DataplaneError::Map {
        name: name.to_owned(),
        source,
    }
}

/// An error with its causes, for errors whose Display leaves the cause out (aya's
/// `BPF_OBJ_PIN failed`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// Loads of one program before an interrupted verification is a failure: the kernel
/// answers EAGAIN when a signal reaches the loading thread during a long verification
/// (the router's programs take milliseconds), which a retry gets past.
const LOAD_TRIES: u32 = 3;

impl Dataplane {
    fn load_program(&mut self, name: &'static str) -> Result<(), DataplaneError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.program_mut(name)?.load() {
                Ok(()) => return Ok(()),
                Err(ProgramError::LoadError { io_error, .. })
                    if io_error.raw_os_error() == Some(libc::EAGAIN) && tries < LOAD_TRIES =>
                {
                    tracing::warn!(
                        program = name,
                        tries,
                        "verification interrupted; loading again"
                    );
                }
                Err(e) => return Err(prog_err(name)(e)),
            }
        }
    }
}

fn prog_err(name: &'static str) -> impl FnOnce(ProgramError) -> DataplaneError {
    move |source| DataplaneError::Program { name, source }
}

const PROGRAMS: [&str; 10] = prog_names::ALL;

/// One program attached to one interface.
#[derive(Debug)]
enum Attachment {
    /// Held by the loaded program: detached when the Dataplane is dropped (tests and
    /// benchmarks, which load without a pin folder).
    Owned {
        prog: &'static str,
        id: SchedClassifierLinkId,
    },
    /// Pinned on bpffs: attached until the pin is removed, whatever happens to the
    /// daemon.
    Pinned { prog: &'static str, path: PathBuf },
    /// A tc filter (clsact, direct action) of a daemon that pins: the kernel keeps it
    /// on the interface after the daemon is gone, and it goes with the interface. The
    /// handle is never dropped by accident (dropping an aya filter link detaches it).
    Filter {
        prog: &'static str,
        link: std::mem::ManuallyDrop<SchedClassifierLink>,
    },
}

impl Attachment {
    fn prog(&self) -> &'static str {
        match self {
            Attachment::Owned { prog, .. }
            | Attachment::Pinned { prog, .. }
            | Attachment::Filter { prog, .. } => prog,
        }
    }
}

pub struct Dataplane {
    ebpf: Ebpf,
    pins: Option<PinLayout>,
    segments: Segments,
    /// Our handles on the per-segment learning tables, by slot.
    fdbs: HashMap<u32, MapData>,
    /// What is attached where, by ifindex.
    links: HashMap<u32, Attachment>,
    /// True when this instance found a previous daemon's maps and links and took them
    /// over instead of starting empty.
    adopted: bool,
    /// How ports attached from now on get their program.
    port_attach: PortAttach,
    /// The segments the router serves, by VNI: their gateway MACs and ACL bits (given
    /// by its sync).
    gateways: std::collections::BTreeMap<u32, Gateway>,
    /// The keys of `gateways`, shared with whoever asks without the lock.
    served: ports_gw::ServedSegments,
    /// The ElasticIP attached to each Subnet NIC here, as the ElasticIPs' last sync
    /// wrote it into every port (`None` before one did).
    public: Option<ports_public::PublicAddresses>,
    /// The other Nodes that route (have endpoints), for the listener lists.
    listen_nodes: std::collections::BTreeSet<u32>,
}

impl Dataplane {
    /// Loads the embedded programs. With `pin_root`, maps and links are pinned under
    /// its version folder, and what a previous daemon of the same layout left there is
    /// adopted: its maps are reused (learned tables included), its links switched to
    /// the programs loaded now (`bpf_link_update`, atomic: no frame is missed), and the
    /// bookkeeping rebuilt from the maps. Links to interfaces that are gone are unpinned.
    pub fn load(pin_root: Option<&Path>) -> Result<Self, DataplaneError> {
        Self::load_sized(pin_root, juneau_common::ct::DEFAULT_ENTRIES)
    }

    /// [`Dataplane::load`] with a connection table of `ct_entries` (a table already
    /// pinned keeps its size: its connections are adopted, not resized away).
    pub fn load_sized(pin_root: Option<&Path>, ct_entries: u32) -> Result<Self, DataplaneError> {
        let pins = pin_root.map(PinLayout::new);
        let mut loader = EbpfLoader::new();
        loader.map_max_entries(map_names::CT, ct_entries.max(2));
        let mut adopted = false;
        if let Some(layout) = &pins {
            layout.prepare()?;
            adopted = layout.has_maps();
            for name in map_names::ALL {
                loader.map_pin_path(name, layout.maps_dir().join(name));
            }
        }
        let ebpf = loader.load(crate::EBPF_OBJECT)?;
        let mut dp = Self {
            ebpf,
            pins,
            segments: Segments::default(),
            fdbs: HashMap::new(),
            links: HashMap::new(),
            adopted,
            port_attach: PortAttach::default(),
            gateways: Default::default(),
            served: Default::default(),
            public: Default::default(),
            listen_nodes: Default::default(),
        };
        for name in PROGRAMS {
            dp.load_program(name)?;
        }
        dp.install_tail_programs()?;
        if dp.adopted {
            dp.adopt()?;
        }
        Ok(dp)
    }

    /// How ports attached from now on get their program (those attached already keep
    /// theirs).
    pub fn set_port_attach(&mut self, how: PortAttach) {
        self.port_attach = how;
    }

    /// True when ports get their program as a tc filter (their links want clsact).
    pub fn ports_use_filters(&self) -> bool {
        self.port_attach == PortAttach::Filter
    }

    /// True when [`Dataplane::load`] took over a previous daemon's state.
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// The pin folders, when this datapath pins.
    pub fn pins(&self) -> Option<&PinLayout> {
        self.pins.as_ref()
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
        self.program(prog_names::PORT_INGRESS)
    }

    fn map_mut(&mut self, name: &'static str) -> Result<&mut Map, DataplaneError> {
        self.ebpf.map_mut(name).ok_or(DataplaneError::Missing(name))
    }

    /// Takes map `name` out of the loaded object for a feature's writer, typed: from
    /// then on the writer owns it (its pin stays; the object no longer finds it).
    fn take_map<T: TryFrom<Map, Error = MapError>>(
        &mut self,
        name: &'static str,
    ) -> Result<T, DataplaneError> {
        let map = self
            .ebpf
            .take_map(name)
            .ok_or(DataplaneError::Missing(name))?;
        T::try_from(map).map_err(map_err(name))
    }

    fn map(&self, name: &'static str) -> Result<&Map, DataplaneError> {
        self.ebpf.map(name).ok_or(DataplaneError::Missing(name))
    }

    /// True when a port program runs on `ifindex` by this datapath's doing (attached
    /// or taken over); which one is the port kind's (`PortKind::program`).
    pub fn port_attached(&self, ifindex: u32) -> bool {
        self.links
            .get(&ifindex)
            .is_some_and(|a| l2::is_port_program(a.prog()))
    }

    /// True when `prog` runs on `ifindex` by this datapath's doing.
    pub fn port_runs(&self, ifindex: u32, prog: &'static str) -> bool {
        self.attached(ifindex, prog)
    }

    /// True when `prog` is attached to `ifindex` by this datapath (or was adopted).
    fn attached(&self, ifindex: u32, prog: &'static str) -> bool {
        self.links.get(&ifindex).is_some_and(|a| a.prog() == prog)
    }

    /// Attaches `prog` to TCX ingress of `ifname` (in the calling thread's namespace);
    /// with a pin folder the link is pinned at once.
    fn attach(
        &mut self,
        prog: &'static str,
        ifname: &str,
        ifindex: u32,
    ) -> Result<Attachment, DataplaneError> {
        let pin = self.pins.as_ref().map(|p| p.link_path(prog, ifindex));
        let program = self.program_mut(prog)?;
        let id = program
            .attach(ifname, TcAttachType::Ingress)
            .map_err(prog_err(prog))?;
        let Some(path) = pin else {
            return Ok(Attachment::Owned { prog, id });
        };
        let link = program.take_link(id).map_err(prog_err(prog))?;
        let pinned = FdLink::try_from(link)
            .map_err(|e| chain(&e))
            .and_then(|fd| fd.pin(&path).map_err(|e| chain(&e)))
            .map_err(|cause| DataplaneError::PinLink {
                prog,
                ifindex,
                cause,
            })?;
        // The pin holds the link now; our descriptor can go.
        drop(pinned);
        tracing::debug!(prog, ifindex, path = %path.display(), "attached and pinned");
        Ok(Attachment::Pinned { prog, path })
    }

    fn detach(&mut self, attachment: Attachment) -> Result<(), DataplaneError> {
        match attachment {
            Attachment::Owned { prog, id } => {
                self.program_mut(prog)?.detach(id).map_err(prog_err(prog))
            }
            Attachment::Pinned { path, .. } => pins::unpin(&path),
            Attachment::Filter { prog, link } => std::mem::ManuallyDrop::into_inner(link)
                .detach()
                .map_err(prog_err(prog)),
        }
    }

    /// Switches a pinned link to this instance's copy of `prog` (atomic, so traffic
    /// never sees the interface without a program).
    fn take_over_link(&mut self, prog: &'static str, path: &Path) -> Result<(), DataplaneError> {
        let fail = |cause: String| DataplaneError::PinLink {
            prog,
            ifindex: 0,
            cause,
        };
        let link = aya::programs::links::PinnedLink::from_pin(path).map_err(|e| fail(chain(&e)))?;
        let link =
            SchedClassifierLink::try_from(FdLink::from(link)).map_err(|e| fail(chain(&e)))?;
        let program = self.program_mut(prog)?;
        let id = program.attach_to_link(link).map_err(prog_err(prog))?;
        // The pin still holds the (updated) link; ours is not needed.
        drop(program.take_link(id).map_err(prog_err(prog))?);
        Ok(())
    }
}
