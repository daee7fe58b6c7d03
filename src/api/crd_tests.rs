//! The CRDs committed under `kind/` are the ones the types generate.
use kube::CustomResourceExt;

use super::{L2Network, NetworkACL, NetworkInterface, SecurityGroup, crds_yaml};

fn committed() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kind/crds.yaml")
}

#[test]
fn l2_03_committed_crd_yaml_matches_the_types() {
    let generated = crds_yaml();
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(committed(), &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(committed()).unwrap_or_default();
    assert!(
        on_disk == generated,
        "kind/crds.yaml differs from the API types: run `UPDATE_GOLDEN=1 cargo test -p juneau --lib l2_03` and commit it"
    );
}

#[test]
fn l2_03_l2network_is_cluster_scoped_with_short_name_l2net() {
    let crd = L2Network::crd();
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.short_names, Some(vec!["l2net".to_owned()]));
    assert_eq!(crd.spec.group, "juneau.loutres.me");
    assert_eq!(crd.spec.versions[0].name, "v1alpha1");
}

#[test]
fn eip_07_network_interface_printer_columns() {
    let crd = NetworkInterface::crd();
    let cols: Vec<String> = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(
        cols,
        [
            "NODE",
            "SUBNET",
            "L2NETWORK",
            "ELASTICIP",
            "ADDRESS",
            "PHASE"
        ]
    );
    assert_eq!(crd.spec.scope, "Namespaced");
}

fn columns<K: CustomResourceExt>() -> Vec<(String, String)> {
    K::crd().spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.name.clone(), c.json_path.clone()))
        .collect()
}

/// POL-03: `kubectl get` shows a rule set's Vpc, its datapath id and whether it is
/// Ready, from the status the controller writes.
#[test]
fn pol_03_network_acl_and_security_group_printer_columns() {
    let ready = ".status.conditions[?(@.type==\"Ready\")].status";
    for (cols, id) in [
        (columns::<NetworkACL>(), ".status.aclID"),
        (columns::<SecurityGroup>(), ".status.groupID"),
    ] {
        let want: Vec<(String, String)> = [("VPC", ".spec.vpc"), ("ID", id), ("READY", ready)]
            .iter()
            .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
            .collect();
        assert_eq!(cols, want);
    }
    assert_eq!(NetworkACL::crd().spec.scope, "Cluster");
    assert_eq!(SecurityGroup::crd().spec.scope, "Cluster");
}

#[test]
fn bgp_03_node_state_peer_and_advertisement_columns() {
    let names = |c: Vec<(String, String)>| c.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    // NAME is the object's own column.
    assert_eq!(
        names(columns::<super::BGPNodeState>()),
        ["READY", "BIRD", "UP", "AGE"]
    );
    assert_eq!(
        names(columns::<super::BGPPeer>()),
        ["MYASN", "PEERASN", "ADDRESS", "PORT", "BFD", "AGE"]
    );
    assert_eq!(
        names(columns::<super::BGPAdvertisement>()),
        ["POOLS", "PREFIX", "NODE", "AGE"]
    );
    // Every Node's daemon lists only its own BGPNodeState.
    let crd = super::BGPNodeState::crd();
    let v = &crd.spec.versions[0];
    assert!(
        v.selectable_fields
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f.json_path == ".spec.nodeName"))
    );
    assert_eq!(crd.spec.scope, "Cluster");
}
