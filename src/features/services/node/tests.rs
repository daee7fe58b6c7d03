//! The frontends a Node holds, from Services and slices (pure).
use std::net::Ipv4Addr;

use super::{FrontendKey, desired};
use crate::{
    api::{
        EndpointSliceRecord, NetworkEndpoint, ServiceRecord,
        networkendpoint::NetworkEndpointSpec,
        service::{ServicePortRecord, SliceEndpoint, SlicePort, TargetPort},
    },
    cluster::World,
};

fn nic(ip: &str, subnet: Option<&str>, l2: Option<&str>, eip: Option<&str>) -> NetworkEndpoint {
    NetworkEndpoint::new(
        &format!("p-{ip}.eth0"),
        NetworkEndpointSpec {
            kind: "Pod".into(),
            subnet: subnet.map(Into::into),
            l2_network: l2.map(Into::into),
            elastic_ip: eip.map(Into::into),
            address: format!("{ip}/16").parse().ok(),
            node_name: "n1".into(),
            ..Default::default()
        },
    )
}

fn ep(ip: &str, node: &str, ready: bool, terminating: bool) -> SliceEndpoint {
    SliceEndpoint {
        addresses: vec![ip.into()],
        ready,
        serving: ready || terminating,
        terminating,
        node: node.into(),
        pod: None,
    }
}

fn web(local: bool) -> ServiceRecord {
    ServiceRecord {
        namespace: "default".into(),
        name: "web".into(),
        cluster_ips: vec!["10.96.0.20".into()],
        ports: vec![
            ServicePortRecord {
                name: "http".into(),
                port: 80,
                protocol: "TCP".into(),
                target_port: TargetPort::Name("http".into()),
            },
            ServicePortRecord {
                name: "dns".into(),
                port: 53,
                protocol: "UDP".into(),
                target_port: TargetPort::Number(5353),
            },
        ],
        selector: None,
        affinity_s: Some(60),
        internal_local: local,
        kind: "ClusterIP".into(),
    }
}

fn slice(endpoints: Vec<SliceEndpoint>) -> EndpointSliceRecord {
    EndpointSliceRecord {
        namespace: "default".into(),
        name: "web-1".into(),
        service: "web".into(),
        address_type: "IPv4".into(),
        managed_by: String::new(),
        ports: vec![
            SlicePort {
                name: "http".into(),
                port: 8080,
                protocol: "TCP".into(),
            },
            SlicePort {
                name: "dns".into(),
                port: 5353,
                protocol: "UDP".into(),
            },
        ],
        endpoints,
    }
}

fn world(local: bool, endpoints: Vec<SliceEndpoint>) -> World {
    let mut w = World::default();
    for ip in ["10.16.0.5", "10.16.0.6", "10.16.0.7"] {
        w.endpoints.push(nic(ip, Some("default"), None, None));
    }
    w.endpoints
        .push(nic("10.16.0.8", Some("default"), None, Some("eip1")));
    w.endpoints.push(nic("192.168.7.3", None, Some("l2"), None));
    w.services.push(web(local));
    w.endpoint_slices.push(slice(endpoints));
    w
}

fn key(port: u16, proto: u8) -> FrontendKey {
    FrontendKey {
        ip: Ipv4Addr::new(10, 96, 0, 20),
        port,
        proto,
    }
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

#[test]
fn svc_03_only_ready_endpoints_that_are_not_terminating_take_new_connections() {
    let w = world(
        false,
        vec![
            ep("10.16.0.5", "n1", true, false),
            ep("10.16.0.6", "n2", false, true),
            ep("10.16.0.7", "n2", false, false),
        ],
    );
    let (state, skipped) = desired(&w, "n1");
    assert!(skipped.is_empty(), "{skipped:?}");
    let http = &state.frontends[&key(80, 6)];
    // The slice port of the same name and protocol: the named target port, resolved.
    assert_eq!(http.backends, [(ip("10.16.0.5"), 8080)]);
    assert_eq!(http.affinity_s, Some(60));
    assert_eq!(
        state.frontends[&key(53, 17)].backends,
        [(ip("10.16.0.5"), 5353)]
    );
    // Nothing on the other protocol of the same port number.
    assert!(!state.frontends.contains_key(&key(53, 6)));
}

#[test]
fn svc_03_internal_traffic_policy_local_keeps_the_nodes_own_endpoints() {
    let eps = vec![
        ep("10.16.0.5", "n1", true, false),
        ep("10.16.0.6", "n2", true, false),
    ];
    let (on_n2, _) = desired(&world(true, eps.clone()), "n2");
    assert_eq!(
        on_n2.frontends[&key(80, 6)].backends,
        [(ip("10.16.0.6"), 8080)]
    );
    // A Node without one rejects (no backend), as kube-proxy does.
    let (on_n3, _) = desired(&world(true, eps.clone()), "n3");
    assert!(on_n3.frontends[&key(80, 6)].backends.is_empty());
    let (cluster, _) = desired(&world(false, eps), "n3");
    assert_eq!(cluster.frontends[&key(80, 6)].backends.len(), 2);
}

#[test]
fn svc_04_l2network_and_direct_elasticip_pods_are_never_backends_and_are_named() {
    let w = world(
        false,
        vec![
            ep("10.16.0.5", "n1", true, false),
            ep("10.16.0.8", "n1", true, false),
            ep("192.168.7.3", "n1", true, false),
            ep("172.18.0.2", "n1", true, false),
        ],
    );
    let (state, skipped) = desired(&w, "n1");
    assert_eq!(
        state.frontends[&key(80, 6)].backends,
        [(ip("10.16.0.5"), 8080)]
    );
    let named = |addr: &str, what: &str| {
        skipped
            .iter()
            .any(|l| l.contains(&format!("endpoint {addr} ")) && l.contains(what))
    };
    assert!(named("10.16.0.8", "direct ElasticIP"), "{skipped:?}");
    assert!(named("192.168.7.3", "L2Network"), "{skipped:?}");
    // A Node's address is not served yet (SVC-02): named, not written.
    assert!(named("172.18.0.2", "SVC-02"), "{skipped:?}");
}

#[test]
fn svc_01_headless_and_external_name_services_have_no_frontend() {
    let mut w = world(false, vec![ep("10.16.0.5", "n1", true, false)]);
    w.services[0].cluster_ips = vec!["None".into()];
    let mut ext = web(false);
    ext.name = "ext".into();
    ext.kind = "ExternalName".into();
    w.services.push(ext);
    let (state, skipped) = desired(&w, "n1");
    assert!(state.frontends.is_empty());
    assert!(skipped.is_empty(), "{skipped:?}");
}

#[test]
fn svc_02_a_node_address_is_a_host_backend_once_the_node_has_a_source_address() {
    use crate::api::{
        Subnet,
        subnet::{NodeAddress, SubnetSpec, SubnetStatus},
    };
    let mut w = world(false, vec![ep("172.18.0.2", "n2", true, false)]);
    let (state, _) = desired(&w, "n1");
    assert!(state.frontends[&key(80, 6)].backends.is_empty());
    let mut s = Subnet::new(
        "default",
        SubnetSpec {
            vpc: "default".into(),
            cidr: "10.16.0.0/16".into(),
            network_acl: None,
        },
    );
    s.status = Some(SubnetStatus {
        node_addresses: vec![
            NodeAddress {
                node: "n1".into(),
                address: "10.16.255.1".parse().ok(),
                node_ip: "172.18.0.1".parse().ok(),
            },
            NodeAddress {
                node: "n2".into(),
                address: "10.16.255.2".parse().ok(),
                node_ip: "172.18.0.2".parse().ok(),
            },
        ],
        ..Default::default()
    });
    w.objects.subnets.push(s);
    let (state, skipped) = desired(&w, "n1");
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(
        state.frontends[&key(80, 6)].backends,
        [(ip("172.18.0.2"), 8080)]
    );
    assert!(state.host_backends.contains(&ip("172.18.0.2")));
    // Pods are routed to, not sent through the stack.
    assert!(!state.host_backends.contains(&ip("10.16.0.5")));
    let (own, others) = super::sources(&w, "n1");
    assert_eq!(own, Some(ip("10.16.255.1")));
    assert_eq!(others, [(ip("10.16.255.2"), ip("172.18.0.2"))]);
    // An address inside a segment that no NIC holds is not sent to the stack.
    let mut w2 = w.clone();
    w2.endpoint_slices[0].endpoints = vec![ep("10.16.9.9", "n1", true, false)];
    let (state, skipped) = desired(&w2, "n1");
    assert!(state.frontends[&key(80, 6)].backends.is_empty());
    assert!(
        skipped.iter().any(|l| l.contains("10.16.9.9")),
        "{skipped:?}"
    );
}
