use crate::{admission::dns_policy, api::net::shown};
use std::collections::BTreeMap;

use super::*;
use crate::{
    api::{
        L2Network, Subnet,
        l2network::{L2Gateway, L2NetworkSpec, L2NetworkStatus},
        subnet::SubnetSpec,
    },
    controller::{Config, acl_refs},
    features::l2::controller as l2network,
};

fn snap() -> Snapshot {
    let mut s = Snapshot::default();
    let mut routed = L2Network::new(
        "routed",
        L2NetworkSpec {
            vpc: "t".into(),
            cidr: Some("10.7.0.0/24".into()),
            gateway: Some(L2Gateway::default()),
            ..Default::default()
        },
    );
    let mut pure = L2Network::new(
        "pure",
        L2NetworkSpec {
            vpc: "t".into(),
            ..Default::default()
        },
    );
    let l2s = Snapshot {
        l2networks: vec![routed.clone(), pure.clone()],
        ..Default::default()
    };
    let st = l2network::reconcile_with(&l2s, &Config::default(), &acl_refs(&l2s));
    routed.status = Some(st["routed"].clone());
    pure.status = Some(st["pure"].clone());
    s.l2networks = vec![routed, pure];
    // A Subnet named like an L2Network: the two never share a pool.
    let mut web = Subnet::new(
        "routed",
        SubnetSpec {
            vpc: "t".into(),
            cidr: "10.71.0.0/28".into(),
            network_acl: None,
        },
    );
    let subnets = Snapshot {
        subnets: vec![web.clone()],
        ..s.clone()
    };
    web.status =
        crate::features::router::controller_subnet::reconcile_with(&subnets, &acl_refs(&subnets))
            .remove("routed");
    s.subnets = vec![web];
    s
}

/// The NICs alone, as most tests read them.
fn pod_nics(pods: &[PodRecord], snap: &Snapshot) -> Vec<NetworkInterface> {
    reconcile_all(pods, snap).interfaces
}

fn pod(name: &str, networks: &str) -> PodRecord {
    PodRecord {
        namespace: "team".into(),
        name: name.into(),
        node: "node-a".into(),
        annotations: BTreeMap::from([(
            "juneau.loutres.me/networks".to_owned(),
            networks.to_owned(),
        )]),
        ..Default::default()
    }
}

#[test]
fn l2_24_one_network_interface_per_entry_named_pod_dot_iface() {
    let s = snap();
    let nics = pod_nics(
        &[pod(
            "app",
            r#"[{"interface":"eth0","l2Network":"routed"},{"interface":"eth1","l2Network":"pure"}]"#,
        )],
        &s,
    );
    let names: Vec<_> = nics
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["app.eth0", "app.eth1"]);
    assert_eq!(nics[0].metadata.namespace.as_deref(), Some("team"));
    assert_eq!(nics[0].spec.node_name, "node-a");
    let st0 = nics[0].status.as_ref().unwrap();
    assert_eq!(shown(&st0.address), "10.7.0.2/24", ".1 is the gateway");
    assert_eq!(
        st0.routes,
        vec![NicRoute {
            dst: "0.0.0.0/0".into(),
            gw: "10.7.0.1".into(),
            ..Default::default()
        }],
        "L2-15"
    );
    assert_eq!(st0.mtu, 1450);
    let st1 = nics[1].status.as_ref().unwrap();
    assert_eq!(
        st1.address, None,
        "L2-25: no address on a cidr-less segment"
    );
    assert!(
        st1.routes.is_empty(),
        "only the first NIC gets a default route"
    );
    assert_eq!(st1.phase, "Allocated");
}

#[test]
fn l2_17_addresses_are_kept_and_never_handed_out_twice() {
    let mut s = snap();
    let first = pod_nics(
        &[pod("a", r#"[{"interface":"eth1","l2Network":"routed"}]"#)],
        &s,
    );
    s.interfaces = first.clone();
    let both = pod_nics(
        &[
            pod("b", r#"[{"interface":"eth1","l2Network":"routed"}]"#),
            pod("a", r#"[{"interface":"eth1","l2Network":"routed"}]"#),
        ],
        &s,
    );
    let addr = |n: &str| {
        both.iter()
            .find(|x| x.metadata.name.as_deref() == Some(n))
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .address
            .map(|a| a.to_string())
            .unwrap_or_default()
    };
    assert_eq!(addr("a.eth1"), "10.7.0.2/24", "kept");
    assert_eq!(addr("b.eth1"), "10.7.0.3/24");
}

#[test]
fn l2_24_a_pod_whose_annotations_stop_parsing_keeps_its_nics_and_addresses() {
    let mut s = snap();
    let first = pod_nics(
        &[pod("a", r#"[{"interface":"eth1","l2Network":"routed"}]"#)],
        &s,
    );
    s.interfaces = first.clone();
    // `a`'s annotation edited into something that is no JSON list, then a new Pod.
    let pods = [
        pod("b", r#"[{"interface":"eth1","l2Network":"routed"}]"#),
        pod("a", r#"{"interface":"eth1"}"#),
    ];
    let next = pod_nics(&pods, &s);
    let of_a = |v: &[NetworkInterface]| -> Vec<NetworkInterface> {
        v.iter()
            .filter(|n| n.spec.pod_ref.name == "a")
            .cloned()
            .collect()
    };
    assert_eq!(
        of_a(&next),
        of_a(&first),
        "a's NICs kept exactly as they were"
    );
    let a1 = of_a(&next)
        .into_iter()
        .find(|n| n.spec.interface == "eth1")
        .unwrap();
    assert_eq!(shown(&a1.status.unwrap().address), "10.7.0.2/24");
    let b = next
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("b.eth1"))
        .unwrap();
    assert_eq!(
        shown(&b.status.as_ref().unwrap().address),
        "10.7.0.3/24",
        "not a's address"
    );
    let why = reconcile_all(&pods, &s).unreadable;
    assert_eq!(why.len(), 1, "{why:?}");
    assert_eq!(why[0].0, "team/a");
    assert!(why[0].1.contains("networks is not a JSON list"), "{why:?}");
}

#[test]
fn l2_27_eth0_on_an_l2network_gets_dns_policy_default() {
    let s = snap();
    let p = pod("app", r#"[{"interface":"eth0","l2Network":"routed"}]"#);
    assert_eq!(dns_policy(&p, &s).as_deref(), Some("Default"));
    let mut none = p.clone();
    none.dns_policy = "None".into();
    assert_eq!(dns_policy(&none, &s), None, "None stays");
    let mut skip = p.clone();
    skip.annotations
        .insert("juneau.loutres.me/dns-inject-skip".into(), "true".into());
    assert_eq!(dns_policy(&skip, &s), None);
    let secondary = pod("app", r#"[{"interface":"eth1","l2Network":"routed"}]"#);
    assert_eq!(dns_policy(&secondary, &s), None, "eth0 stays on its Subnet");
    let _ = L2NetworkStatus::default();
}

#[test]
fn l2_15_subnet_nics_get_the_subnets_address_gateway_and_kernel_mtu() {
    let s = snap();
    let nics = pod_nics(
        &[pod(
            "web",
            r#"[{"interface":"eth0","subnet":"routed"},{"interface":"eth1","l2Network":"routed"}]"#,
        )],
        &s,
    );
    let st0 = nics[0].status.as_ref().unwrap();
    assert_eq!(nics[0].spec.subnet.as_deref(), Some("routed"));
    assert_eq!(
        shown(&st0.address),
        "10.71.0.2/28",
        ".1 is the Subnet's gateway"
    );
    assert_eq!(st0.vni, s.subnets[0].status.as_ref().unwrap().vni);
    assert_eq!(st0.mtu, 0, "L2-21: Subnet NICs keep the kernel's MTU");
    assert_eq!(
        st0.routes,
        vec![NicRoute {
            dst: "0.0.0.0/0".into(),
            gw: "10.71.0.1".into(),
            ..Default::default()
        }]
    );
    let st1 = nics[1].status.as_ref().unwrap();
    assert_eq!(
        shown(&st1.address),
        "10.7.0.2/24",
        "the L2Network of the same name has a pool of its own"
    );
    // No Subnet of that name, or one without a VNI yet: pending, saying which.
    let missing = pod_nics(&[pod("x", r#"[{"interface":"eth0","subnet":"nope"}]"#)], &s);
    let st = missing[0].status.as_ref().unwrap();
    assert_eq!(st.phase, "Pending");
    assert_eq!(st.conditions[0].reason, "SubnetNotFound");
    let mut unready = s.clone();
    unready.subnets[0].status = None;
    let waiting = pod_nics(
        &[pod("x", r#"[{"interface":"eth0","subnet":"routed"}]"#)],
        &unready,
    );
    assert_eq!(
        waiting[0].status.as_ref().unwrap().conditions[0].reason,
        "NetworkNotReady"
    );
}

#[test]
fn l2_17_a_subnet_runs_out_of_addresses_with_a_clear_reason() {
    let s = snap();
    // A /28 holds 13 hosts once the gateway is reserved.
    let pods: Vec<PodRecord> = (0..14)
        .map(|i| {
            pod(
                &format!("p{i}"),
                r#"[{"interface":"eth0","subnet":"routed"}]"#,
            )
        })
        .collect();
    let nics = pod_nics(&pods, &s);
    let last = nics[13].status.as_ref().unwrap();
    assert_eq!(
        shown(&nics[12].status.as_ref().unwrap().address),
        "10.71.0.14/28"
    );
    assert_eq!(last.phase, "Failed");
    assert_eq!(
        last.conditions[0].message,
        "10.71.0.0/28 has no free address left"
    );
}
