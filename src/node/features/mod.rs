//! Node features: what each keeps of the rest of the cluster in this Node's datapath.
//! A feature is its `features/<name>/feature.rs` (the trait is `node::feature`): its
//! desired state, computed from the cluster by a pure function
//! (`features::router::gateway::desired`, `features::elasticip::node::holders`, ...),
//! and the write
//! of that state through its map writer, which owns the feature's maps behind the
//! feature's own lock (`RouterWriter`, `ElasticIpWriter`). The port array, the
//! segments and their lists have one owner, the `Dataplane` (the CNI's ports and the
//! remote lists); a feature takes that lock only for what it reads or asks of it, and
//! always after its own (router, then ports), never the other way round.
//! The agent's sync runs them in order over one read of the cluster
//! ([`Features::sync`]); a feature that fails is logged and the others still run.
//!
//! A new feature adds a file and a line in [`Features::new`], not a
//! branch in the sync. A feature that needs a process beside the daemon (the BGP
//! speaker) starts it in [`NodeFeature::start`] through the crate's
//! [`Supervisor`], which the agent owns; the others have none.

use std::sync::{Arc, atomic::AtomicU32};

pub use crate::features::bgp::pools::ExternalPools;
pub use crate::features::elasticip::feature::ElasticIps;
pub use crate::features::l2::feature::RemoteLists;
pub use crate::features::policy::feature::Policy;
pub use crate::features::router::feature::Router;
pub use crate::features::services::feature::Services;

use super::feature::{NodeFeature, NodeView};
use super::{Dataplane, DataplaneError};
use crate::{cluster::World, supervisor::Supervisor};

/// Every feature of the Node, in the order a sync runs them: policy before the router
/// (a segment names its NetworkACL's set once it is written), the router before the
/// ElasticIPs (both read the ports the router marks), the announced pools, then the
/// Services, the remote lists last.
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
                Box::new(ExternalPools::new(dp.take_ext_pools()?)),
                Box::new(Services::new(dp.take_services()?)),
                Box::new(RemoteLists::default()),
            ],
        })
    }

    /// Adds a feature that needs more of the daemon than a datapath (the BGP speaker:
    /// its folder): it runs after the others.
    pub fn push(&mut self, feature: Box<dyn NodeFeature>) {
        self.list.push(feature);
    }

    /// Starts every feature's processes; a feature that fails is logged, the others
    /// still start.
    pub fn start(&self, processes: &Arc<Supervisor>, node: &str) {
        for f in &self.list {
            if let Err(e) = f.start(processes, node) {
                tracing::error!(feature = f.name(), error = %e, "processes not started");
            }
        }
    }

    /// Tells every feature the daemon is leaving, in the reverse order of their start.
    pub fn stop(&self, processes: &Supervisor) {
        for f in self.list.iter().rev() {
            f.stop(processes);
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::node::feature::FeatureError;
    use crate::supervisor::{ProcessSpec, Ready};

    /// A feature with a process: starts it under its own name, stops it on leave.
    struct Speaker;

    impl NodeFeature for Speaker {
        fn name(&self) -> &'static str {
            "speaker"
        }
        fn sync(&self, _: &World, _: &NodeView<'_>) -> Result<usize, FeatureError> {
            Ok(0)
        }
        fn start(&self, processes: &Arc<Supervisor>, node: &str) -> Result<(), FeatureError> {
            processes.add(ProcessSpec {
                name: "speaker".into(),
                what: format!("node {node}: speaker"),
                program: "/bin/sleep".into(),
                args: vec!["60".into()],
                netns: None,
                log: std::env::temp_dir().join(format!("jn-speaker-{}.log", std::process::id())),
                ready: Ready::Spawned,
                stop_signal: libc::SIGTERM,
                tied: true,
            });
            processes
                .start("speaker", Duration::from_secs(5))
                .map(drop)
                .map_err(|source| FeatureError::Process {
                    what: "the speaker",
                    source,
                })
        }
        fn stop(&self, processes: &Supervisor) {
            processes.stop("speaker");
        }
    }

    /// A feature without one.
    struct Quiet;

    impl NodeFeature for Quiet {
        fn name(&self) -> &'static str {
            "quiet"
        }
        fn sync(&self, _: &World, _: &NodeView<'_>) -> Result<usize, FeatureError> {
            Ok(0)
        }
    }

    #[test]
    fn features_start_and_stop_their_processes_and_the_others_have_none() {
        let features = Features {
            list: vec![Box::new(Quiet), Box::new(Speaker)],
        };
        let processes = Supervisor::new(Vec::<ProcessSpec>::new(), false);
        features.start(&processes, "n1");
        let pid = processes.pid("speaker").expect("the speaker runs");
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        assert_eq!(
            processes.pid("quiet"),
            None,
            "a feature without a process has none"
        );
        features.stop(&processes);
        assert_eq!(processes.pid("speaker"), None);
        let events = processes.events.lock().unwrap().join("\n");
        assert!(events.contains("node n1: speaker stopped"), "{events}");
        processes.shutdown();
    }
}
