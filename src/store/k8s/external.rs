//! What the controller writes for ElasticIPs: the statuses of ExternalNetworks,
//! ElasticIPs and ElasticIPAttachments, and the ARPAdvertisements that follow holders.
use std::collections::BTreeSet;

use kube::{Api, ResourceExt, api::DeleteParams};

use super::{KubeCluster, is_not_found, refused};
use crate::{
    api::{ARPAdvertisement, ElasticIP, ElasticIPAttachment, ExternalNetwork},
    cluster::ClusterError,
    controller::{Desired, elasticip::key},
    store::World,
};

impl KubeCluster {
    pub(super) async fn apply_external(
        &self,
        world: &World,
        desired: &Desired,
    ) -> Result<bool, ClusterError> {
        let c = &self.client;
        let mut changed = false;
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
            if let Some(want) = desired.elastic_ip_status.get(&key(e))
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
            .filter(|n| n.starts_with("eip-") && !wanted.contains(n))
        {
            self.may_write()?;
            match adverts.delete(&gone, &DeleteParams::default()).await {
                Ok(_) => changed = true,
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(refused(&format!("delete {gone}"))(e)),
            }
        }
        Ok(changed)
    }
}
