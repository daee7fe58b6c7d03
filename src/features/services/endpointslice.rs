//! The EndpointSlices of the Services with a selector, where no
//! kube-controller-manager runs (the standalone mode): what its EndpointSlice
//! controller would write, from the Pods' labels and named ports and the NICs Juneau
//! gave them (pure). A Pod is an endpoint through its eth0's address; it is ready once
//! its node daemon has attached that NIC (its NetworkEndpoint exists), and terminating
//! while it is being deleted (serving, not ready: no new connections, SVC-03).
//! Pods whose named target ports resolve differently go to different slices, as
//! upstream does (`<service>-juneau-<n>`). Every slice carries the managed-by label of
//! this controller, and only those are replaced.
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::{
    api::{
        EndpointSliceRecord, PodRecord, ServiceRecord,
        service::{MANAGED_BY_JUNEAU, ServicePortRecord, SliceEndpoint, SlicePort, TargetPort},
    },
    cluster::World,
};

/// The port a Pod serves a Service port on, when it has one.
fn resolve(pod: &PodRecord, port: &ServicePortRecord) -> Option<u16> {
    match &port.target_port {
        TargetPort::Number(n) => Some(*n),
        TargetPort::Name(name) => pod.ports.get(name).copied(),
    }
}

fn selects(selector: &BTreeMap<String, String>, pod: &PodRecord) -> bool {
    selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v))
}

/// What the slices read of the Pods' NICs, indexed once per pass: each eth0's address,
/// and which NICs their daemons attached (by `namespace`, NIC name).
struct Nics<'a> {
    address: HashMap<(&'a str, &'a str), std::net::Ipv4Addr>,
    attached: HashSet<(&'a str, &'a str)>,
}

impl<'a> Nics<'a> {
    fn new(world: &'a World) -> Self {
        let key = |m: &'a kube::api::ObjectMeta| {
            (
                m.namespace.as_deref().unwrap_or("default"),
                m.name.as_deref().unwrap_or(""),
            )
        };
        Nics {
            address: world
                .objects
                .interfaces
                .iter()
                .filter_map(|n| Some((key(&n.metadata), n.ip()?)))
                .collect(),
            attached: world.endpoints.iter().map(|e| key(&e.metadata)).collect(),
        }
    }
}

/// The slices of one Service.
fn slices_of(world: &World, nics: &Nics<'_>, svc: &ServiceRecord) -> Vec<EndpointSliceRecord> {
    let Some(selector) = &svc.selector else {
        return Vec::new();
    };
    // Resolved ports -> endpoints: one slice per distinct set, in a stable order.
    let mut groups: BTreeMap<Vec<SlicePort>, Vec<SliceEndpoint>> = BTreeMap::new();
    for pod in world
        .pods
        .iter()
        .filter(|p| p.namespace == svc.namespace && selects(selector, p))
    {
        let nic = format!("{}.eth0", pod.name);
        let key = (pod.namespace.as_str(), nic.as_str());
        let Some(address) = nics.address.get(&key).copied() else {
            continue;
        };
        let attached = nics.attached.contains(&key);
        let ports: Vec<SlicePort> = svc
            .ports
            .iter()
            .filter_map(|p| {
                Some(SlicePort {
                    name: p.name.clone(),
                    port: resolve(pod, p)?,
                    protocol: p.protocol.clone(),
                })
            })
            .collect();
        groups.entry(ports).or_default().push(SliceEndpoint {
            addresses: vec![address.to_string()],
            ready: attached && !pod.terminating,
            serving: attached,
            terminating: pod.terminating,
            node: pod.node.clone(),
            pod: Some(format!("{}/{}", pod.namespace, pod.name)),
        });
    }
    groups
        .into_iter()
        .enumerate()
        .map(|(i, (ports, endpoints))| EndpointSliceRecord {
            namespace: svc.namespace.clone(),
            name: format!("{}-juneau-{i}", svc.name),
            service: svc.name.clone(),
            address_type: "IPv4".into(),
            managed_by: MANAGED_BY_JUNEAU.into(),
            ports,
            endpoints,
        })
        .collect()
}

/// Every slice this controller maintains.
pub fn reconcile_all(world: &World) -> Vec<EndpointSliceRecord> {
    let nics = Nics::new(world);
    world
        .services
        .iter()
        .flat_map(|s| slices_of(world, &nics, s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        NetworkEndpoint, NetworkInterface,
        networkendpoint::NetworkEndpointSpec,
        networkinterface::{NetworkInterfaceSpec, NetworkInterfaceStatus, PodRef},
    };

    fn pod(name: &str, app: &str, http: Option<u16>, terminating: bool) -> PodRecord {
        PodRecord {
            namespace: "default".into(),
            name: name.into(),
            node: "n1".into(),
            labels: [("app".to_owned(), app.to_owned())].into(),
            ports: http.map(|p| ("http".to_owned(), p)).into_iter().collect(),
            terminating,
            ..Default::default()
        }
    }

    fn world(pods: Vec<PodRecord>, attached: &[&str]) -> World {
        let mut w = World::default();
        for (i, p) in pods.iter().enumerate() {
            let mut nic = NetworkInterface::new(
                &format!("{}.eth0", p.name),
                NetworkInterfaceSpec {
                    interface: "eth0".into(),
                    subnet: Some("default".into()),
                    pod_ref: PodRef {
                        name: p.name.clone(),
                    },
                    node_name: p.node.clone(),
                    ..Default::default()
                },
            );
            nic.metadata.namespace = Some("default".into());
            nic.status = Some(NetworkInterfaceStatus {
                address: format!("10.16.0.{}/16", i + 10).parse().ok(),
                ..Default::default()
            });
            w.objects.interfaces.push(nic);
        }
        for a in attached {
            let mut e = NetworkEndpoint::new(
                &format!("{a}.eth0"),
                NetworkEndpointSpec {
                    kind: "Pod".into(),
                    node_name: "n1".into(),
                    ..Default::default()
                },
            );
            e.metadata.namespace = Some("default".into());
            w.endpoints.push(e);
        }
        w.pods = pods;
        w.services.push(ServiceRecord {
            namespace: "default".into(),
            name: "web".into(),
            cluster_ips: vec!["10.96.0.20".into()],
            ports: vec![ServicePortRecord {
                name: "http".into(),
                port: 80,
                protocol: "TCP".into(),
                target_port: TargetPort::Name("http".into()),
            }],
            selector: Some([("app".to_owned(), "web".to_owned())].into()),
            kind: "ClusterIP".into(),
            ..Default::default()
        });
        w
    }

    #[test]
    fn svc_03_standalone_slices_follow_selectors_named_ports_and_pod_state() {
        let w = world(
            vec![
                pod("a", "web", Some(8080), false),
                pod("b", "web", Some(9090), false),
                pod("c", "web", Some(8080), true),
                pod("d", "db", Some(8080), false),
                pod("e", "web", Some(8080), false),
            ],
            &["a", "b", "c", "d"],
        );
        let slices = reconcile_all(&w);
        // Two port sets (8080, 9090): two slices; d is not selected.
        assert_eq!(slices.len(), 2, "{slices:#?}");
        let s8080 = slices.iter().find(|s| s.ports[0].port == 8080).unwrap();
        let by = |s: &EndpointSliceRecord, a: &str| {
            s.endpoints
                .iter()
                .find(|e| e.addresses[0] == a)
                .cloned()
                .unwrap()
        };
        // a: ready. c: being deleted (serving, terminating, not ready). e: not
        // attached yet (not ready).
        assert!(by(s8080, "10.16.0.10").ready);
        let c = by(s8080, "10.16.0.12");
        assert!(!c.ready && c.serving && c.terminating);
        assert!(!by(s8080, "10.16.0.14").ready);
        assert_eq!(s8080.managed_by, MANAGED_BY_JUNEAU);
        assert_eq!(s8080.service, "web");
        let s9090 = slices.iter().find(|s| s.ports[0].port == 9090).unwrap();
        assert_eq!(s9090.endpoints.len(), 1);
    }
}
