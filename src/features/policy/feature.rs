//! NetworkACLs and SecurityGroups on this Node: every rule set of the cluster and the
//! groups of this Node's NICs, desired by `node::policy::desired` (pure) and written by
//! the `PolicyWriter` (`dataplane/policy.rs`), which owns those maps. It runs before the
//! router, so a segment's NetworkACL is in the maps before the segment names it (a set
//! named before it is written denies: nothing passes unjudged meanwhile).
use std::sync::Mutex;

use crate::node::feature::{FeatureError, LoggedOnce, NodeFeature, NodeView};
use crate::{cluster::World, features::policy::node as policy, node::dataplane::PolicyWriter};

pub struct Policy {
    writer: Mutex<PolicyWriter>,
    problems: LoggedOnce,
}

impl Policy {
    pub fn new(writer: PolicyWriter) -> Self {
        Self {
            writer: Mutex::new(writer),
            problems: LoggedOnce::default(),
        }
    }
}

impl NodeFeature for Policy {
    fn name(&self) -> &'static str {
        "policy"
    }

    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        let (want, problems) = policy::desired(world, node.name);
        for p in problems {
            self.problems
                .warn(p, "policy rule left out or denying (fails closed)");
        }
        let done = self
            .writer
            .lock()
            .expect("policy writer lock")
            .sync(&want)
            .map_err(FeatureError::write("policy maps"))?;
        if done.sets > 0 {
            tracing::info!(
                sets = done.sets,
                epoch = done.epoch,
                "policy rule sets written"
            );
        }
        Ok(done.sets + done.nics)
    }
}
