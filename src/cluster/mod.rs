//! How every component reads the cluster: one interface, two backends.
//!
//! The node agent, the admission webhook and the controller hold a [`Cluster`], never a
//! concrete store. The embedded [`crate::store::Store`] implements it in-process (the
//! standalone run and the tests), [`crate::store::remote::RemoteStore`] implements it
//! for a `juneau node` process that reads the standalone run's store over a local
//! socket, and [`crate::store::k8s::KubeCluster`] implements it over the Kubernetes API.
use std::time::Duration;

mod apply;
mod desired;
mod kinds;
mod plan;
mod snapshot;
mod world;

pub use apply::apply_to;
pub use desired::{Desired, key};
pub use kinds::Scope;
pub(crate) use kinds::snapshot_kinds;
pub use plan::{Key, Write, plan};
pub use snapshot::Snapshot;
pub use world::{World, node_addresses};

use crate::api::{NetworkEndpoint, NetworkInterface, condition::Condition};

#[derive(Clone, Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot reach the cluster store at {at}: {cause}")]
    Unreachable { at: String, cause: String },
    #[error("the cluster store answered with an error: {0}")]
    Refused(String),
}

/// Lists and watches of the kinds Juneau's components read, and the few writes they
/// make (NetworkEndpoints by the daemons, desired state by the controller).
pub trait Cluster: Send + Sync {
    /// Everything readable, and the generation it was read at.
    fn read(&self) -> Result<(World, u64), ClusterError>;

    /// Blocks until the generation moves past `seen` or `timeout` passes; returns the
    /// generation now.
    fn wait(&self, seen: u64, timeout: Duration) -> Result<u64, ClusterError>;

    /// Creates or replaces a NetworkEndpoint (by namespace and name).
    fn put_endpoint(&self, endpoint: NetworkEndpoint) -> Result<(), ClusterError>;

    /// Deletes a NetworkEndpoint; deleting one that is gone succeeds.
    fn delete_endpoint(&self, namespace: &str, name: &str) -> Result<(), ClusterError>;

    /// Writes what the controller computed (statuses, NetworkInterfaces, RouteTables);
    /// true when anything changed.
    fn apply(&self, desired: &Desired) -> Result<bool, ClusterError>;

    /// Puts a condition a Node's daemon owns (`PortsExhausted`) on that Node's
    /// ExternalNetworkAttachment `name`, the controller's own conditions kept; true
    /// when it changed. An attachment that is gone is left alone (false).
    fn set_attachment_condition(
        &self,
        name: &str,
        condition: Condition,
    ) -> Result<bool, ClusterError>;

    /// Writes Node `node`'s BGPNodeState status whole (BGP-03: the daemon owns it);
    /// true when it changed. A Node without one (no BGPPeer) is left alone (false).
    fn set_bgp_node_state(
        &self,
        node: &str,
        status: crate::api::bgpnodestate::BGPNodeStateStatus,
    ) -> Result<bool, ClusterError>;

    /// The NICs of a Pod, as the controller wrote them.
    fn interfaces_of(
        &self,
        namespace: &str,
        pod: &str,
    ) -> Result<Vec<NetworkInterface>, ClusterError> {
        let (world, _) = self.read()?;
        let mut nics: Vec<NetworkInterface> = world
            .objects
            .interfaces
            .into_iter()
            .filter(|n| {
                n.metadata.namespace.as_deref() == Some(namespace) && n.spec.pod_ref.name == pod
            })
            .collect();
        // In the Pod's order, whatever order the backend lists them in.
        nics.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        Ok(nics)
    }
}
