//! The kube-rs glue: watches L2Networks and writes their status with the same pure
//! reconciler standalone mode uses.
use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
    runtime::{Controller, controller::Action, watcher},
};

use super::{Config, l2network};
use crate::{
    admission::Snapshot,
    api::{L2Network, Subnet},
};

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("kube API: {0}")]
    Api(#[from] kube::Error),
}

pub struct Ctx {
    pub client: Client,
    pub cfg: Config,
}

/// The field manager of every status Juneau writes.
pub const MANAGER: &str = "juneau-controller";

/// Reconciles one L2Network: reads the objects VNI allocation depends on, computes the
/// status, patches it if it differs.
pub async fn reconcile_l2network(l2: Arc<L2Network>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let nets: Api<L2Network> = Api::all(ctx.client.clone());
    let subnets: Api<Subnet> = Api::all(ctx.client.clone());
    let snap = Snapshot {
        l2networks: nets.list(&ListParams::default()).await?.items,
        subnets: subnets.list(&ListParams::default()).await?.items,
        ..Default::default()
    };
    let name = l2.name_any();
    let desired = l2network::reconcile_all(&snap, &ctx.cfg).remove(&name);
    if let Some(status) = desired
        && l2.status.as_ref() != Some(&status)
    {
        let patch = serde_json::json!({ "status": status });
        nets.patch_status(
            &name,
            &PatchParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            },
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Errors are retried after a pause; the reconciler is idempotent.
pub fn error_policy(_l2: Arc<L2Network>, _err: &KubeError, _ctx: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// Runs the L2Network controller until the stream ends.
pub async fn run(client: Client, cfg: Config) {
    let nets: Api<L2Network> = Api::all(client.clone());
    Controller::new(nets, watcher::Config::default())
        .run(
            reconcile_l2network,
            error_policy,
            Arc::new(Ctx { client, cfg }),
        )
        .for_each(|_| futures::future::ready(()))
        .await;
}
