//! Node features: what each keeps of the rest of the cluster in this Node's datapath.
//! A feature is one file here: its desired state, computed from the cluster by a pure
//! function (`node::gateway::desired`, `node::elasticip::holders`, ...), and the write
//! of that state through its map writer, which owns the feature's maps behind the
//! feature's own lock (`RouterWriter`, `ElasticIpWriter`). The port array, the
//! segments and their lists have one owner, the `Dataplane` (the CNI's ports and the
//! remote lists); a feature takes that lock only for what it reads or asks of it, and
//! always after its own (router, then ports), never the other way round.
//! The agent's sync runs them in order over one read of the cluster
//! ([`Features::sync`]); a feature that fails is logged and the others still run.
//!
//! The next features (NAT, BGP) each add a file and a line in
//! [`Features::new`], not a branch in the sync.
mod elastic_ips;
mod policy;
mod remotes;
mod router;
mod services;

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex, atomic::AtomicU32},
};

pub use elastic_ips::ElasticIps;
pub use policy::Policy;
pub use remotes::RemoteLists;
pub use router::Router;
pub use services::Services;

use super::{Dataplane, DataplaneError};
use crate::cluster::World;

#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    #[error("cannot write {what}: {source}")]
    Write {
        what: &'static str,
        source: Box<DataplaneError>,
    },
    #[error("cannot set up {what} in the Node's namespace: {cause}")]
    Host { what: &'static str, cause: String },
    #[error("cannot read {what}: {source}; {kept}")]
    Read {
        what: &'static str,
        kept: &'static str,
        source: Box<DataplaneError>,
    },
}

impl FeatureError {
    fn write(what: &'static str) -> impl FnOnce(DataplaneError) -> Self {
        move |source| FeatureError::Write {
            what,
            source: Box::new(source),
        }
    }
}

/// What a feature's sync may use of its Node.
pub struct NodeView<'a> {
    /// This Node's name, as the cluster knows it.
    pub name: &'a str,
    /// The port owner (its own lock: a feature takes it only for what it reads or asks
    /// of the ports, after its own lock).
    pub dataplane: &'a Mutex<Dataplane>,
}

/// One feature of the Node.
pub trait NodeFeature: Send + Sync {
    /// Its name in the logs.
    fn name(&self) -> &'static str;
    /// Brings its maps in line with `world`; returns how many entries it changed.
    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError>;
}

/// Lines of what a feature left out (an object it cannot serve), each logged once.
#[derive(Default)]
struct LoggedOnce(Mutex<BTreeSet<String>>);

impl LoggedOnce {
    fn warn(&self, line: String, why: &'static str) {
        if self
            .0
            .lock()
            .expect("logged-once lock")
            .insert(line.clone())
        {
            tracing::warn!(what = %line, "{why}");
        }
    }
}

/// Every feature of the Node, in the order a sync runs them: policy before the router
/// (a segment names its NetworkACL's set once it is written), the router before the
/// ElasticIPs (both read the ports the router marks), then the Services, the remote
/// lists last.
pub struct Features {
    list: Vec<Box<dyn NodeFeature>>,
}

impl Features {
    /// `garp_rounds`: rounds of gratuitous ARP for an ElasticIP this Node starts
    /// answering for (shared with the daemon, which sets it from its settings).
    /// Each feature that owns maps takes their writer from `dp` here.
    pub fn new(garp_rounds: Arc<AtomicU32>, dp: &mut Dataplane) -> Result<Self, DataplaneError> {
        Ok(Self {
            list: vec![
                Box::new(Policy::new(dp.take_policy()?)),
                Box::new(Router::new(dp.take_router()?)),
                Box::new(ElasticIps::new(garp_rounds, dp.take_elastic_ips()?)),
                Box::new(Services::new(dp.take_services()?)),
                Box::new(RemoteLists::default()),
            ],
        })
    }

    /// Runs every feature over one read of the cluster.
    pub fn sync(&self, world: &World, node: &NodeView<'_>) {
        for f in &self.list {
            match f.sync(world, node) {
                Ok(0) => {}
                Ok(n) => tracing::debug!(feature = f.name(), changed = n, "synced"),
                Err(e) => tracing::error!(feature = f.name(), error = %e, "not synced"),
            }
        }
    }
}
