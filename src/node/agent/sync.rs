//! The rest of the cluster in the datapath: one read of the cluster, then every Node
//! feature (`node::features`: the router, the ElasticIPs, the remote lists) in order.
use super::Agent;
use crate::{cluster::ClusterError, node::feature::NodeView};

impl Agent {
    /// Brings the datapath's view of the rest of the cluster in line with it.
    /// Returns once a sync that read the cluster after this call has been written
    /// (before a CNI ADD configures ports, so that a port of a gateway segment enters
    /// the router from its first frame; after every request; on every change). Callers
    /// meanwhile share one sync (`node::coalesce`).
    pub fn sync_from_cluster(&self) -> Result<(), ClusterError> {
        self.syncs.run(|| {
            let (world, _) = self.cluster.read()?;
            let node = NodeView {
                name: &self.node,
                dataplane: &self.dataplane,
            };
            self.features.sync(&world, &node);
            Ok(())
        })
    }
}
