//! What the controller writes for ElasticIPs: the statuses of ExternalNetworks,
//! ElasticIPs and ElasticIPAttachments, and the ARPAdvertisements that follow holders.
use std::collections::BTreeSet;

use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};

use super::{KubeCluster, is_not_found, refused};
use crate::{
    api::{
        ARPAdvertisement, ElasticIP, ElasticIPAttachment, ExternalNetwork,
        ExternalNetworkAttachment, NATGateway, elasticip::FINALIZER,
    },
    cluster::{ClusterError, Desired, World, key},
};

impl KubeCluster {
    pub(super) async fn apply_external(
        &self,
        world: &World,
        desired: &Desired,
    ) -> Result<bool, ClusterError> {
        let c = &self.client;
        // Finalizers first: they are preconditioned on the version read, which a status
        // write would move.
        let mut changed = self.apply_finalizers(world, desired).await?;
        let nets: Api<ExternalNetwork> = Api::all(c.clone());
        for n in &world.objects.external_networks {
            let name = n.name_any();
            if let Some(want) = desired.external_network_status.get(&name)
                && n.status.as_ref() != Some(want)
            {
                self.apply_status(&nets, &name, want).await?;
                changed = true;
            }
        }
        for e in &world.objects.elastic_ips {
            let api: Api<ElasticIP> =
                Api::namespaced(c.clone(), &e.namespace().unwrap_or_default());
            // One let go above is gone (or going) with its status.
            if let Some(want) = desired.elastic_ip_status.get(&key(e))
                && !desired.eip_release.contains(&key(e))
                && e.status.as_ref() != Some(want)
            {
                self.apply_status(&api, &e.name_any(), want).await?;
                changed = true;
            }
        }
        for a in &world.objects.elastic_ip_attachments {
            let api: Api<ElasticIPAttachment> =
                Api::namespaced(c.clone(), &a.namespace().unwrap_or_default());
            if let Some(want) = desired.attachment_status.get(&key(a))
                && a.status.as_ref() != Some(want)
            {
                self.apply_status(&api, &a.name_any(), want).await?;
                changed = true;
            }
        }
        let adverts: Api<ARPAdvertisement> = Api::all(c.clone());
        for want in &desired.arp_advertisements {
            let have = world
                .objects
                .arp_advertisements
                .iter()
                .find(|a| a.name_any() == want.name_any());
            if have.map(|a| &a.spec) != Some(&want.spec) {
                self.apply_object(&adverts, want).await?;
                changed = true;
            }
        }
        let wanted: BTreeSet<String> = desired
            .arp_advertisements
            .iter()
            .map(|a| a.name_any())
            .collect();
        for gone in world
            .objects
            .arp_advertisements
            .iter()
            .map(|a| a.name_any())
            .filter(|n| (n.starts_with("eip-") || n.starts_with("ena-")) && !wanted.contains(n))
        {
            self.may_write()?;
            match adverts.delete(&gone, &DeleteParams::default()).await {
                Ok(_) => {
                    self.expect(self.caches.arp_advertisements.shows_deleted(None, &gone));
                    changed = true;
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(refused(&format!("delete {gone}"))(e)),
            }
        }
        changed |= self.apply_nat(world, desired).await?;
        Ok(changed)
    }

    /// NAT-02: the Nodes' ExternalNetworkAttachments (spec, then status; any other is
    /// deleted) and the NATGateways' statuses.
    async fn apply_nat(&self, world: &World, desired: &Desired) -> Result<bool, ClusterError> {
        let c = &self.client;
        let mut changed = false;
        let gateways: Api<NATGateway> = Api::all(c.clone());
        for g in &world.objects.nat_gateways {
            let name = g.name_any();
            if let Some(want) = desired.nat_gateway_status.get(&name)
                && g.status.as_ref() != Some(want)
            {
                self.apply_status(&gateways, &name, want).await?;
                changed = true;
            }
        }
        let api: Api<ExternalNetworkAttachment> = Api::all(c.clone());
        for want in &desired.external_network_attachments {
            let name = want.name_any();
            let have = world.objects.external_network_attachment(&name);
            if have.map(|a| &a.spec) != Some(&want.spec) {
                let mut spec_only = want.clone();
                spec_only.status = None;
                self.apply_object(&api, &spec_only).await?;
                changed = true;
            }
            if let Some(status) = &want.status
                && have.and_then(|a| a.status.as_ref()) != Some(status)
            {
                self.apply_status(&api, &name, status).await?;
                changed = true;
            }
        }
        for gone in world
            .objects
            .external_network_attachments
            .iter()
            .map(|a| a.name_any())
            .filter(|n| {
                !desired
                    .external_network_attachments
                    .iter()
                    .any(|w| &w.name_any() == n)
            })
        {
            self.may_write()?;
            match api.delete(&gone, &DeleteParams::default()).await {
                Ok(_) => {
                    self.expect(
                        self.caches
                            .external_network_attachments
                            .shows_deleted(None, &gone),
                    );
                    changed = true;
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(refused(&format!("delete {gone}"))(e)),
            }
        }
        Ok(changed)
    }

    /// EIP-19: every ElasticIP carries the finalizer; a deleted one loses it once no
    /// NIC names it. The whole list is written (a merge patch replaces arrays), from
    /// the object as read.
    async fn apply_finalizers(
        &self,
        world: &World,
        desired: &Desired,
    ) -> Result<bool, ClusterError> {
        let mut changed = false;
        for e in &world.objects.elastic_ips {
            let k = key(e);
            let mut list = e.metadata.finalizers.clone().unwrap_or_default();
            if desired.eip_finalize.contains(&k) {
                list.push(FINALIZER.to_owned());
            } else if desired.eip_release.contains(&k) {
                list.retain(|f| f != FINALIZER);
            } else {
                continue;
            }
            self.may_write()?;
            let api: Api<ElasticIP> =
                Api::namespaced(self.client.clone(), &e.namespace().unwrap_or_default());
            let patch = serde_json::json!({
                "metadata": {"finalizers": list, "resourceVersion": e.metadata.resource_version},
            });
            match api
                .patch(
                    &e.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(written) => self.expect(self.caches.elastic_ips.shows(&written)),
                // Changed since it was read: the next pass reads it again.
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(refused(&format!("finalizers of {k}"))(e)),
            }
            changed = true;
        }
        Ok(changed)
    }
}
