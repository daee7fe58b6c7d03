//! The announced prefixes as this Node delivers them (EIP-14) as a Node feature: every
//! sync writes `jn_ext_pools` from `desired::delivery`. Apart from the speaker, so it
//! runs on every Node, whoever runs the speaker (or none does): a direct NIC's packet
//! to a range pinned to another Node must leave for the upstream either way.
use std::sync::Mutex;

use super::desired::delivery;
use crate::{
    cluster::World,
    node::{
        dataplane::ExtPoolWriter,
        feature::{FeatureError, NodeFeature, NodeView},
    },
};

pub struct ExternalPools {
    writer: Mutex<ExtPoolWriter>,
}

impl ExternalPools {
    pub fn new(writer: ExtPoolWriter) -> Self {
        Self {
            writer: Mutex::new(writer),
        }
    }
}

impl NodeFeature for ExternalPools {
    fn name(&self) -> &'static str {
        "external-pools"
    }

    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        let want = delivery(world, node.name);
        self.writer
            .lock()
            .expect("external pools lock")
            .set(&want)
            .map_err(FeatureError::write("the announced pools (jn_ext_pools)"))
    }
}
