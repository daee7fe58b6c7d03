//! What a Node feature is (`NodeFeature`), what its sync may use of the Node
//! (`NodeView`) and how it fails (`FeatureError`): apart from the list of features
//! (`node::features`), so that a feature's file imports this and the list imports the
//! features, never both ways.
use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
};

use super::{Dataplane, DataplaneError};
use crate::{cluster::World, supervisor::Supervisor};

#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    #[error("cannot write {what}: {source}")]
    Write {
        what: &'static str,
        source: Box<DataplaneError>,
    },
    #[error("cannot set up {what} in the Node's namespace: {cause}")]
    Host { what: &'static str, cause: String },
    #[error("cannot start {what}: {source}")]
    Process {
        what: &'static str,
        source: crate::supervisor::SupervisorError,
    },
    #[error("cannot read {what}: {source}; {kept}")]
    Read {
        what: &'static str,
        kept: &'static str,
        source: Box<DataplaneError>,
    },
}

impl FeatureError {
    pub(crate) fn write(what: &'static str) -> impl FnOnce(DataplaneError) -> Self {
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
    /// Starts the processes it needs beside the daemon (the BGP speaker) through
    /// `processes`, which keeps them running; a feature that needs none has none.
    fn start(&self, _processes: &Arc<Supervisor>, _node: &str) -> Result<(), FeatureError> {
        Ok(())
    }
    /// The daemon is leaving: what its processes do now is the feature's to say (one
    /// whose state must outlive a daemon restart is left running, untied).
    fn stop(&self, _processes: &Supervisor) {}
}

/// Lines of what a feature left out (an object it cannot serve), each logged once.
#[derive(Default)]
pub(crate) struct LoggedOnce(Mutex<BTreeSet<String>>);

impl LoggedOnce {
    pub(crate) fn warn(&self, line: String, why: &'static str) {
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
