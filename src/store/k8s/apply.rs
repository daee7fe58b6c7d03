//! What the controller writes of a pass on a real cluster: the difference between the
//! [`Desired`] state and the caches (as this process last read them, its own writes
//! included), by server-side apply and the status subresource. The policy and
//! ElasticIP kinds have their own files (`policy.rs`, `external.rs`).
use std::collections::BTreeMap;

use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch},
};

use super::{KubeCluster, is_not_found, refused};
use crate::{
    api::{DEFAULT_VPC, L2Network, NetworkInterface, RouteTable, Subnet, Vpc},
    cluster::{ClusterError, Desired, World},
};

impl KubeCluster {
    /// Writes what differs between `desired` and `world` (the caches, as this process
    /// last read them with its own writes).
    pub(super) async fn apply_desired(
        &self,
        world: &World,
        desired: &Desired,
    ) -> Result<bool, ClusterError> {
        let c = &self.client;
        let mut changed = false;
        // The default Vpc, then its Subnet (admitted only once the Vpc exists).
        if let Some(vpc) = &desired.default_vpc
            && world.objects.vpc(DEFAULT_VPC).is_none()
        {
            changed |= self.create_once(&Api::<Vpc>::all(c.clone()), vpc).await?;
        }
        if let Some(subnet) = &desired.default_subnet
            && world.objects.vpc(DEFAULT_VPC).is_some()
            && world.objects.subnet(DEFAULT_VPC).is_none()
        {
            changed |= self
                .create_once(&Api::<Subnet>::all(c.clone()), subnet)
                .await?;
        }
        let nets: Api<L2Network> = Api::all(c.clone());
        for l in &world.objects.l2networks {
            let name = l.name_any();
            if let Some(want) = desired.l2_status.get(&name)
                && l.status.as_ref() != Some(want)
            {
                self.apply_status(&nets, &name, want).await?;
                changed = true;
            }
        }
        let subnets: Api<Subnet> = Api::all(c.clone());
        for s in &world.objects.subnets {
            let name = s.name_any();
            if let Some(want) = desired.subnet_status.get(&name)
                && s.status.as_ref() != Some(want)
            {
                self.apply_status(&subnets, &name, want).await?;
                changed = true;
            }
        }
        changed |= self.apply_policy(world, desired).await?;
        changed |= self.apply_external(world, desired).await?;
        let tables: Api<RouteTable> = Api::all(c.clone());
        for want in &desired.route_tables {
            // Only tables that still exist (one deleted meanwhile stays deleted), and only
            // the routes: the rest of the object is its owner's.
            let Some(have) = world
                .objects
                .route_tables
                .iter()
                .find(|t| t.name_any() == want.name_any())
            else {
                continue;
            };
            if have.spec.routes != want.spec.routes {
                let patch = serde_json::json!({
                    "apiVersion": RouteTable::api_version(&()),
                    "kind": RouteTable::kind(&()),
                    "metadata": {"name": want.name_any()},
                    "spec": {"routes": want.spec.routes},
                });
                self.may_write()?;
                let written = tables
                    .patch(&want.name_any(), &self.params(), &Patch::Apply(&patch))
                    .await
                    .map_err(refused(&format!("routes of {}", want.name_any())))?;
                self.expect(self.caches.route_tables.shows(&written));
                changed = true;
            }
        }
        let key = |n: &NetworkInterface| (n.namespace().unwrap_or_default(), n.name_any());
        let have: BTreeMap<_, &NetworkInterface> = world
            .objects
            .interfaces
            .iter()
            .map(|n| (key(n), n))
            .collect();
        for want in &desired.interfaces {
            let (ns, name) = key(want);
            let api: Api<NetworkInterface> = Api::namespaced(c.clone(), &ns);
            let current = have.get(&(ns.clone(), name.clone()));
            if current.map(|n| &n.spec) != Some(&want.spec) {
                self.apply_object(&api, want).await?;
                changed = true;
            }
            if current.and_then(|n| n.status.as_ref()) != want.status.as_ref()
                && let Some(status) = &want.status
            {
                self.apply_status(&api, &name, status).await?;
                changed = true;
            }
        }
        let wanted: std::collections::BTreeSet<_> = desired.interfaces.iter().map(key).collect();
        for gone in have.keys().filter(|k| !wanted.contains(*k)) {
            let api: Api<NetworkInterface> = Api::namespaced(c.clone(), &gone.0);
            self.may_write()?;
            match api.delete(&gone.1, &DeleteParams::default()).await {
                Ok(_) => {
                    self.expect(self.caches.interfaces.shows_deleted(Some(&gone.0), &gone.1));
                    changed = true;
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(refused(&format!("delete {}", gone.1))(e)),
            }
        }
        Ok(changed)
    }
}
