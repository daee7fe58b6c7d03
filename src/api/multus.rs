//! Multus' network selection annotation (`k8s.v1.cni.cncf.io/networks`), read for one
//! thing: which of a Pod's interfaces Multus calls a delegate for (MX-04). A Juneau NIC
//! on such an interface is plumbed by that call alone (its NetworkAttachmentDefinition
//! names Juneau's plugin), never by the cluster network's call for eth0.
use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

pub const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";

#[derive(Deserialize)]
struct Selection {
    #[serde(default)]
    interface: Option<String>,
}

/// The interfaces Multus will call a delegate for, as it names them: each selected
/// network's `interface`, else `net<N>` by its place in the list (1 for the first).
/// Both of Multus' forms are read: a JSON list of objects, or `name[@iface]`
/// separated by commas. An annotation that does not parse names none (Multus refuses
/// the Pod then, so no delegate call comes).
pub fn delegated_interfaces(annotations: &BTreeMap<String, String>) -> BTreeSet<String> {
    let Some(value) = annotations.get(NETWORKS).map(|v| v.trim()) else {
        return BTreeSet::new();
    };
    let named: Vec<Option<String>> = if value.starts_with('[') {
        match serde_json::from_str::<Vec<Selection>>(value) {
            Ok(list) => list.into_iter().map(|s| s.interface).collect(),
            Err(_) => return BTreeSet::new(),
        }
    } else {
        value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.split_once('@').map(|(_, iface)| iface.to_owned()))
            .collect()
    };
    named
        .into_iter()
        .enumerate()
        .map(|(i, iface)| {
            iface
                .filter(|f| !f.is_empty())
                .unwrap_or_else(|| format!("net{}", i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(value: &str) -> Vec<String> {
        let a = BTreeMap::from([(NETWORKS.to_owned(), value.to_owned())]);
        delegated_interfaces(&a).into_iter().collect()
    }

    #[test]
    fn mx_04_multus_names_its_interfaces_in_either_form() {
        assert_eq!(of("macvlan-lab"), ["net1"]);
        assert_eq!(of("a, other/b@lab0 ,c"), ["lab0", "net1", "net3"]);
        assert_eq!(
            of(r#"[{"name": "a"}, {"name": "b", "interface": "lab0", "namespace": "x"}]"#),
            ["lab0", "net1"]
        );
        assert!(of("[{not json").is_empty());
        assert!(delegated_interfaces(&BTreeMap::new()).is_empty());
    }
}
