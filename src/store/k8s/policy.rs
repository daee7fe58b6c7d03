//! What the controller writes for NetworkACLs and SecurityGroups: their statuses
//! (`aclID` / `groupID`, the rule set's version and counts, what uses them, the
//! conditions), by the status subresource, as for the segments.
use kube::{Api, ResourceExt};

use super::KubeCluster;
use crate::{
    api::{NetworkACL, SecurityGroup},
    cluster::{ClusterError, Desired, World},
};

impl KubeCluster {
    pub(super) async fn apply_policy(
        &self,
        world: &World,
        desired: &Desired,
    ) -> Result<bool, ClusterError> {
        let c = &self.client;
        let mut changed = false;
        let acls: Api<NetworkACL> = Api::all(c.clone());
        for a in &world.objects.network_acls {
            let name = a.name_any();
            if let Some(want) = desired.network_acl_status.get(&name)
                && a.status.as_ref() != Some(want)
            {
                self.apply_status(&acls, &name, want).await?;
                changed = true;
            }
        }
        let groups: Api<SecurityGroup> = Api::all(c.clone());
        for g in &world.objects.security_groups {
            let name = g.name_any();
            if let Some(want) = desired.security_group_status.get(&name)
                && g.status.as_ref() != Some(want)
            {
                self.apply_status(&groups, &name, want).await?;
                changed = true;
            }
        }
        Ok(changed)
    }
}
