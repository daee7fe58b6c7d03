//! The remote VTEP lists of each segment (`jn_l2_remote`): a Node is listed for a
//! segment while any endpoint of the segment lives there (reference counted per
//! endpoint by `Dataplane::set_remotes`).
use std::collections::BTreeMap;

use crate::cluster::World;
use crate::node::feature::{FeatureError, LoggedOnce, NodeFeature, NodeView};

#[derive(Default)]
pub struct RemoteLists {
    /// Endpoints left out (an unreadable nodeIP), each logged once.
    skipped: LoggedOnce,
}

/// VNI -> remote VTEP (host order) -> how many of the segment's endpoints live there.
pub type Remotes = BTreeMap<u32, BTreeMap<u32, u32>>;

impl RemoteLists {
    /// The lists `node` wants (pure), and the endpoints it had to leave out.
    pub fn desired(world: &World, node: &str) -> (Remotes, Vec<String>) {
        let vni_of = |l2: &str| {
            world
                .objects
                .l2network(l2)
                .and_then(|l| l.status.as_ref())
                .map(|s| s.vni)
                .unwrap_or(0)
        };
        let mut want = Remotes::new();
        let mut skipped = Vec::new();
        for e in world.endpoints.iter().filter(|e| e.spec.node_name != node) {
            let Some(vni) = e.spec.l2_network.as_deref().map(vni_of) else {
                continue;
            };
            let Some(ip) = e.spec.node_ip else {
                skipped.push(format!(
                    "NetworkEndpoint {}/{}: spec.nodeIP is unset; its Node is left out of the remote lists",
                    e.metadata.namespace.as_deref().unwrap_or(""),
                    e.metadata.name.as_deref().unwrap_or(""),
                ));
                continue;
            };
            if vni != 0 {
                *want
                    .entry(vni)
                    .or_default()
                    .entry(ip.to_bits())
                    .or_default() += 1;
            }
        }
        (want, skipped)
    }
}

impl NodeFeature for RemoteLists {
    fn name(&self) -> &'static str {
        "remote-lists"
    }

    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        let (want, skipped) = Self::desired(world, node.name);
        for line in skipped {
            self.skipped.warn(line, "left out of the remote lists");
        }
        node.dataplane
            .lock()
            .expect("dataplane lock")
            .set_remotes(&want)
            .map_err(FeatureError::write("the remote lists"))
    }
}
