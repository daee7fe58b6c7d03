//! A Pod as Juneau sees it: what admission, the controller and the CNI need of it.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A Pod: its identity, Node and annotations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub annotations: BTreeMap<String, String>,
    /// Set by the mutating side of admission (L2-27).
    pub dns_policy: String,
    /// Being deleted (`metadata.deletionTimestamp`): its NICs still exist, but an
    /// ElasticIP it named may be handed over (EIP-20).
    #[serde(default)]
    pub terminating: bool,
    /// When the Pod was created (RFC 3339), for the oldest-first holder choice.
    #[serde(default)]
    pub created: String,
    /// Its labels: KubeVirt names a virt-launcher Pod's VM there.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its containers' named ports (a Service's `targetPort` by name).
    #[serde(default)]
    pub ports: BTreeMap<String, u16>,
}

/// What KubeVirt puts on every virt-launcher Pod.
const KUBEVIRT_COMPONENT: (&str, &str) = ("kubevirt.io", "virt-launcher");
/// The VirtualMachine a virt-launcher Pod runs (on the VMI, copied to its Pod).
const KUBEVIRT_VM: &str = "vm.kubevirt.io/name";

impl PodRecord {
    /// Which workload the Pod's NICs belong to (EIP-20: a new NIC of the same one may
    /// wait for an ElasticIP an older one holds): the `allocation-identity` annotation,
    /// else `vmi.<VM>` for a KubeVirt virt-launcher Pod, so a restarted VM keeps its
    /// ElasticIP without anyone writing an annotation.
    pub fn allocation_identity(&self) -> Option<String> {
        let key = format!("{}allocation-identity", super::ANNOTATION_PREFIX);
        if let Some(set) = self.annotations.get(&key) {
            return Some(set.clone());
        }
        let (component, launcher) = KUBEVIRT_COMPONENT;
        if self.labels.get(component).map(String::as_str) != Some(launcher) {
            return None;
        }
        self.labels.get(KUBEVIRT_VM).map(|vm| format!("vmi.{vm}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> PodRecord {
        let map = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        PodRecord {
            annotations: map(annotations),
            labels: map(labels),
            ..Default::default()
        }
    }

    #[test]
    fn eip_20_a_virt_launcher_pod_carries_its_vms_identity() {
        let launcher = [
            ("kubevirt.io", "virt-launcher"),
            ("vm.kubevirt.io/name", "db"),
        ];
        assert_eq!(
            pod(&[], &launcher).allocation_identity().as_deref(),
            Some("vmi.db")
        );
        // The annotation wins; a Pod that only borrows the label is no launcher.
        let set = [("juneau.loutres.me/allocation-identity", "mine")];
        assert_eq!(
            pod(&set, &launcher).allocation_identity().as_deref(),
            Some("mine")
        );
        assert_eq!(pod(&[], &launcher[1..]).allocation_identity(), None);
        assert_eq!(pod(&[], &launcher[..1]).allocation_identity(), None);
    }
}
