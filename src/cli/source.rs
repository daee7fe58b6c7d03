//! Where `describe` and `trace` read the cluster's objects: a standalone run's store
//! (its socket given, or the one run found on this machine), or the Kubernetes API from
//! the kubeconfig, as kubectl itself does.
use std::path::{Path, PathBuf};

use super::CliError;
use crate::cluster::{Cluster, World};

/// The field manager named on the (read-only) client.
const MANAGER: &str = "kubectl-juneau";

/// The store sockets of the standalone runs on this machine that answer.
fn standalone_stores() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(crate::node::daemon::RUN_BASE) else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("sa-"))
        .map(|e| e.path().join("store.sock"))
        .filter(|s| std::os::unix::net::UnixStream::connect(s).is_ok())
        .collect()
}

/// The objects, from `store` if given, else from the Kubernetes API when `kubeconfig`
/// or `KUBECONFIG` names one, else from the one standalone run on this machine, else
/// from `~/.kube/config`.
pub fn read_world(store: Option<&Path>, kubeconfig: Option<&Path>) -> Result<World, CliError> {
    let query = |why: String| CliError::Query {
        what: "the cluster's objects".into(),
        why,
    };
    let cluster: Box<dyn Cluster> = match (store, kubeconfig) {
        (Some(s), _) => Box::new(crate::store::remote::RemoteStore::new(s)),
        (None, Some(k)) => Box::new(
            crate::store::k8s::KubeCluster::connect(Some(k), MANAGER)
                .map_err(|e| query(e.to_string()))?,
        ),
        // KUBECONFIG names the cluster, as it does for kubectl.
        (None, None) if std::env::var_os("KUBECONFIG").is_some() => Box::new(
            crate::store::k8s::KubeCluster::connect(None, MANAGER)
                .map_err(|e| query(e.to_string()))?,
        ),
        (None, None) => match standalone_stores().as_slice() {
            [one] => Box::new(crate::store::remote::RemoteStore::new(one)),
            [] => Box::new(
                crate::store::k8s::KubeCluster::connect(None, MANAGER)
                    .map_err(|e| query(e.to_string()))?,
            ),
            many => {
                return Err(CliError::Usage(format!(
                    "{} standalone runs on this machine: pick one with --store ({})",
                    many.len(),
                    many.iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        },
    };
    cluster
        .read()
        .map(|(world, _)| world)
        .map_err(|e| query(e.to_string()))
}
