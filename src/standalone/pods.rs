//! The Pods of a standalone run, made and deleted as a container runtime and a
//! kubelet would: a sandbox (network namespace) and the real CNI plugin binary.
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use super::{PodDef, StandaloneError, container_id, run::Run, socket_of};
use crate::{api::PodRecord, netns::Owned};

/// How long a Pod deleted gracefully stays terminating before its CNI DEL.
const TERMINATION_GRACE: Duration = Duration::from_secs(1);

/// A Pod of the run: its definition, container id and namespace.
pub struct RunningPod {
    pub def: PodDef,
    pub cid: String,
    pub ns: Owned,
}

fn cni_binary() -> PathBuf {
    super::sibling_binary("juneau-cni")
}

/// Invokes the real CNI binary as a container runtime would.
pub fn cni(command: &str, pod: &RunningPod, ifname: &str) -> Result<String, StandaloneError> {
    let conf = serde_json::json!({
        "cniVersion": crate::cni::VERSION,
        "name": "juneau",
        "type": "juneau-cni",
        "socket": socket_of(&pod.def.node),
    });
    let bin = cni_binary();
    let mut child = Command::new(&bin)
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", &pod.cid)
        .env("CNI_NETNS", pod.ns.path())
        .env("CNI_IFNAME", ifname)
        .env("CNI_PATH", bin.parent().unwrap_or(Path::new("/")))
        .env(
            "CNI_ARGS",
            format!(
                "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={}",
                pod.def.namespace, pod.def.name
            ),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| {
            StandaloneError::Cni(format!(
                "cannot run {}: {e} (build it with cargo build)",
                bin.display()
            ))
        })?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(conf.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(StandaloneError::Cni(format!(
            "CNI {command} of {}/{}: {}",
            pod.def.namespace,
            pod.def.name,
            stdout.trim()
        )))
    }
}

impl Run {
    pub fn pods(&self) -> &[RunningPod] {
        &self.pods
    }

    pub fn pod(&self, name: &str) -> Option<&RunningPod> {
        self.pods.iter().find(|p| p.def.name == name)
    }

    /// Admits a Pod and creates it as a runtime would (namespace, CNI ADD). A failed ADD
    /// keeps the Pod (its namespace stays, as a runtime keeps the sandbox to retry);
    /// [`Run::retry_add`] tries again.
    pub fn add_pod(&mut self, def: &PodDef) -> Result<String, StandaloneError> {
        self.admit_pod(def)?;
        cni("ADD", self.pods.last().expect("admitted"), "eth0")
    }

    /// Admits a Pod and makes its sandbox (namespace) without its CNI ADD, as the API
    /// server and a kubelet do before the runtime calls the plugin; [`Run::retry_add`]
    /// runs the ADD. Two Pods admitted back to back race for what they name (EIP-20).
    pub fn admit_pod(&mut self, def: &PodDef) -> Result<(), StandaloneError> {
        self.store.create_pod(PodRecord {
            namespace: def.namespace.clone(),
            name: def.name.clone(),
            node: def.node.clone(),
            annotations: def.annotations.clone(),
            labels: def.labels.clone(),
            ports: def.ports.clone(),
            ..Default::default()
        })?;
        let ns = Owned::create(&format!("{}-{}-{}", self.prefix, def.namespace, def.name))?;
        self.pods.push(RunningPod {
            cid: container_id(&def.namespace, &def.name),
            def: def.clone(),
            ns,
        });
        Ok(())
    }

    /// Creates Pod `name` of scenario `s` again, as declared, on `node` when given (a
    /// Pod moved to another Node); refused while it runs. Returns its Node.
    pub fn add_pod_again(
        &mut self,
        s: &crate::scenario::Scenario,
        name: &str,
        node: Option<&str>,
    ) -> Result<String, StandaloneError> {
        if self.pod(name).is_some() {
            return Err(StandaloneError::Scenario(format!(
                "add_pod: {name:?} is running; delete_pod it first"
            )));
        }
        let mut def = s
            .pods
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .ok_or_else(|| StandaloneError::Scenario(format!("no pod {name:?}")))?;
        if let Some(node) = node {
            def.node = node.to_string();
        }
        self.add_pod(&def)?;
        Ok(def.node)
    }

    /// CNI ADD again for a Pod whose ADD failed.
    pub fn retry_add(&self, name: &str) -> Result<String, StandaloneError> {
        let pod = self
            .pod(name)
            .ok_or_else(|| StandaloneError::Scenario(format!("no pod {name:?}")))?;
        cni("ADD", pod, "eth0")
    }

    /// Deletes a Pod as a kubelet does: CNI DEL, then the sandbox (namespace) goes and
    /// the Pod leaves the store. A DEL that fails (daemon down) is returned after the
    /// rest is done, as a runtime would retry it.
    pub fn delete_pod(&mut self, name: &str) -> Result<(), StandaloneError> {
        let i = self
            .pods
            .iter()
            .position(|p| p.def.name == name)
            .ok_or_else(|| StandaloneError::Scenario(format!("no pod {name:?}")))?;
        let del = cni("DEL", &self.pods[i], "eth0");
        let pod = self.pods.remove(i);
        self.store.delete_pod(&pod.def.namespace, &pod.def.name);
        drop(pod);
        del.map(|_| ())
    }

    /// Deletes a Pod gracefully, as the API server and a kubelet do: first it is
    /// terminating (its endpoints take no new connections, SVC-03) until the daemons
    /// have seen that, then [`Run::delete_pod`].
    pub fn terminate_pod(&mut self, name: &str) -> Result<(), StandaloneError> {
        let pod = self
            .pod(name)
            .ok_or_else(|| StandaloneError::Scenario(format!("no pod {name:?}")))?;
        self.store
            .set_terminating(&pod.def.namespace.clone(), &pod.def.name.clone());
        // The slices, then every daemon's maps, follow within a second (SVC-01's bound).
        std::thread::sleep(TERMINATION_GRACE);
        self.delete_pod(name)
    }

    /// Deletes a Pod as Kubernetes does the Pods of a lost Node (eviction, force
    /// delete): it leaves the store at once, with no CNI DEL, since nothing is left on
    /// the Node to run one. Its sandbox is handed back, for the caller to drop when it
    /// likes. For benches and tests that simulate a Node loss
    /// (`harness/benches/eip_failover.rs`).
    pub fn force_delete_pod(&mut self, name: &str) -> Result<RunningPod, StandaloneError> {
        let i = self
            .pods
            .iter()
            .position(|p| p.def.name == name)
            .ok_or_else(|| StandaloneError::Scenario(format!("no pod {name:?}")))?;
        let pod = self.pods.remove(i);
        self.store.delete_pod(&pod.def.namespace, &pod.def.name);
        Ok(pod)
    }
}
