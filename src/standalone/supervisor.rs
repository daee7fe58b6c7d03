//! One `juneau node` process per Node namespace, kept running by the crate's
//! [`Supervisor`] as a DaemonSet keeps its Pods: a daemon that exits is started again,
//! and the run says so.
//!
//! Every daemon is tied to the run: when the standalone run dies (even by SIGKILL) its
//! daemons get SIGTERM and exit cleanly, their datapaths stay pinned, and nothing of
//! theirs serves on.
use std::path::PathBuf;

pub use crate::supervisor::Supervisor;
use crate::supervisor::{ProcessSpec, Ready};

/// How one Node's daemon is started.
#[derive(Clone, Debug)]
pub struct DaemonSpec {
    pub node: String,
    /// The Node's network namespace (`/run/netns/<name>`).
    pub netns: PathBuf,
    pub args: Vec<String>,
    pub log: PathBuf,
    pub pid_file: PathBuf,
}

impl From<DaemonSpec> for ProcessSpec {
    fn from(d: DaemonSpec) -> Self {
        ProcessSpec {
            what: format!("node {}: daemon", d.node),
            name: d.node,
            program: super::sibling_binary("juneau"),
            args: std::iter::once("node".to_owned()).chain(d.args).collect(),
            netns: Some(d.netns),
            log: d.log,
            ready: Ready::PidFile(d.pid_file),
            stop_signal: libc::SIGTERM,
            tied: true,
        }
    }
}
