//! What the controller writes of a pass on a real cluster: each [`Write`] that
//! `cluster::plan` lists (the rules every backend shares), sent to the API server by
//! server-side apply, the status subresource, a merge patch (the finalizers) or a
//! delete. The next read waits until the caches show each (`expect`).
use futures::StreamExt;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};

use super::{KubeCluster, cache::Cached, is_not_found, refused};
use crate::{
    api::{
        ARPAdvertisement, BGPAdvertisement, BGPNodeState, ElasticIP, ElasticIPAttachment,
        ExternalNetwork, ExternalNetworkAttachment, L2Network, NATGateway, NetworkACL,
        NetworkInterface, RouteTable, SecurityGroup, Subnet, Vpc,
    },
    cluster::{ClusterError, Desired, World, Write, plan},
};

/// NetworkInterface writes in flight at once (each a round trip or two to the API
/// server).
const INTERFACE_WRITES_AT_ONCE: usize = 16;

impl KubeCluster {
    /// Writes what differs between `desired` and `world` (the caches, as this process
    /// last read them with its own writes).
    pub(super) async fn apply_desired(
        &self,
        world: &World,
        desired: &Desired,
    ) -> Result<bool, ClusterError> {
        let mut changed = false;
        let writes = plan(world, desired);
        let mut rest = writes.as_slice();
        while let Some(first) = rest.first() {
            // A run of NetworkInterface writes goes out at once: each is one NIC's
            // (its spec, then its status, in order inside), no two the same NIC, and
            // a burst of Pods otherwise waits one round trip per NIC (their ADDs wait
            // for these: `pod_network_share_p99`). Everything else stays in order.
            let run = rest
                .iter()
                .take_while(|w| matches!(w, Write::Interface { .. }))
                .count();
            if run > 1 {
                let results: Vec<Result<bool, ClusterError>> = futures::stream::iter(&rest[..run])
                    .map(|w| self.execute(w))
                    .buffer_unordered(INTERFACE_WRITES_AT_ONCE)
                    .collect()
                    .await;
                for r in results {
                    changed |= r?;
                }
                rest = &rest[run..];
            } else {
                changed |= self.execute(first).await?;
                rest = &rest[1..];
            }
        }
        Ok(changed)
    }

    async fn status_of<K: Cached>(
        &self,
        api: Api<K>,
        name: &str,
        status: &impl serde::Serialize,
    ) -> Result<bool, ClusterError> {
        self.apply_status(&api, name, status).await?;
        Ok(true)
    }

    /// Deletes `name` (gone already is no error); true when this call deleted it.
    async fn delete_of<K: Cached>(
        &self,
        api: Api<K>,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<bool, ClusterError> {
        self.may_write()?;
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                self.expect(K::cache(&self.caches).shows_deleted(namespace, name));
                Ok(true)
            }
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(refused(&format!("delete {name}"))(e)),
        }
    }

    async fn execute(&self, w: &Write) -> Result<bool, ClusterError> {
        let c = || self.client.clone();
        match w {
            Write::CreateVpc(v) => self.create_once(&Api::<Vpc>::all(c()), v).await,
            Write::CreateSubnet(s) => self.create_once(&Api::<Subnet>::all(c()), s).await,
            Write::L2NetworkStatus(n, s) => self.status_of(Api::<L2Network>::all(c()), n, s).await,
            Write::SubnetStatus(n, s) => self.status_of(Api::<Subnet>::all(c()), n, s).await,
            Write::NetworkAclStatus(n, s) => {
                self.status_of(Api::<NetworkACL>::all(c()), n, s).await
            }
            Write::SecurityGroupStatus(n, s) => {
                self.status_of(Api::<SecurityGroup>::all(c()), n, s).await
            }
            Write::Finalizers {
                eip: (ns, name),
                list,
                resource_version,
            } => {
                self.may_write()?;
                let api: Api<ElasticIP> = Api::namespaced(c(), ns);
                // The whole list (a merge patch replaces arrays), from the version read.
                let patch = serde_json::json!({
                    "metadata": {"finalizers": list, "resourceVersion": resource_version},
                });
                match api
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(written) => self.expect(self.caches.elastic_ips.shows(&written)),
                    // Changed since it was read: the next pass reads it again.
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(refused(&format!("finalizers of {ns}/{name}"))(e)),
                }
                Ok(true)
            }
            Write::ExternalNetworkStatus(n, s) => {
                self.status_of(Api::<ExternalNetwork>::all(c()), n, s).await
            }
            Write::ElasticIpStatus((ns, n), s) => {
                self.status_of(Api::<ElasticIP>::namespaced(c(), ns), n, s)
                    .await
            }
            Write::AttachmentStatus((ns, n), s) => {
                self.status_of(Api::<ElasticIPAttachment>::namespaced(c(), ns), n, s)
                    .await
            }
            Write::Advertisement(a) => {
                self.apply_object(&Api::<ARPAdvertisement>::all(c()), a)
                    .await?;
                Ok(true)
            }
            Write::DeleteAdvertisement(n) => {
                self.delete_of(Api::<ARPAdvertisement>::all(c()), None, n)
                    .await
            }
            Write::NatGatewayStatus(n, s) => {
                self.status_of(Api::<NATGateway>::all(c()), n, s).await
            }
            Write::NodeAttachment {
                attachment,
                spec,
                status,
            } => {
                let api: Api<ExternalNetworkAttachment> = Api::all(c());
                if *spec {
                    let mut spec_only = attachment.clone();
                    spec_only.status = None;
                    self.apply_object(&api, &spec_only).await?;
                }
                if *status && let Some(st) = &attachment.status {
                    self.apply_status(&api, &attachment.name_any(), st).await?;
                }
                Ok(true)
            }
            Write::BgpAdvertisement(a) => {
                self.apply_object(&Api::<BGPAdvertisement>::all(c()), a)
                    .await?;
                Ok(true)
            }
            Write::DeleteBgpAdvertisement(n) => {
                self.delete_of(Api::<BGPAdvertisement>::all(c()), None, n)
                    .await
            }
            Write::BgpNodeState(s) => {
                let mut spec_only = s.clone();
                spec_only.status = None;
                self.apply_object(&Api::<BGPNodeState>::all(c()), &spec_only)
                    .await?;
                Ok(true)
            }
            Write::DeleteBgpNodeState(n) => {
                self.delete_of(Api::<BGPNodeState>::all(c()), None, n).await
            }
            Write::DeleteNodeAttachment(n) => {
                self.delete_of(Api::<ExternalNetworkAttachment>::all(c()), None, n)
                    .await
            }
            Write::Routes(table, routes) => {
                self.may_write()?;
                let patch = serde_json::json!({
                    "apiVersion": RouteTable::api_version(&()),
                    "kind": RouteTable::kind(&()),
                    "metadata": {"name": table},
                    "spec": {"routes": routes},
                });
                let written = Api::<RouteTable>::all(c())
                    .patch(table, &self.params(), &Patch::Apply(&patch))
                    .await
                    .map_err(refused(&format!("routes of {table}")))?;
                self.expect(self.caches.route_tables.shows(&written));
                Ok(true)
            }
            Write::Interface { nic, spec, status } => {
                let api: Api<NetworkInterface> =
                    Api::namespaced(c(), &nic.namespace().unwrap_or_default());
                if *spec {
                    self.apply_object(&api, nic).await?;
                }
                if *status && let Some(st) = &nic.status {
                    self.apply_status(&api, &nic.name_any(), st).await?;
                }
                Ok(true)
            }
            Write::DeleteInterface((ns, n)) => {
                self.delete_of(Api::<NetworkInterface>::namespaced(c(), ns), Some(ns), n)
                    .await
            }
            // In a cluster, kube-controller-manager maintains the EndpointSlices.
            Write::Slices(_) => Ok(false),
        }
    }
}
