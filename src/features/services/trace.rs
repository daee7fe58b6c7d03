//! `kubectl juneau trace P <ClusterIP>:<port>[/tcp|udp|sctp]`: a Pod NIC's connection to
//! a Service, step by step, and which backend it gets and why. From the objects: the
//! Service, whether the client's Vpc consumes Services, the backends a new connection
//! may get on the client's Node (what its daemon computes, `node::services::desired`,
//! with what it leaves out and why); then, when the Node's pinned maps are on this
//! machine, the frontend as the datapath holds it and the client's connections in the
//! connection table: each one's backend, by affinity or by the Maglev table. Policy is
//! judged for each backend a connection may get (`trace_policy.rs`): the datapath judges
//! the translated destination, so the backend's NetworkACL and SecurityGroups decide, not
//! the ClusterIP's.
use std::net::Ipv4Addr;

use crate::cli::{CliError, hop::Hop};
use crate::{
    api::service::ip_proto,
    cluster::World,
    features::services::node::{self as services, FrontendKey},
};

/// A Service frontend as `trace` takes it: `10.96.0.10:53`, `10.96.0.10:53/udp`.
pub fn parse_frontend(to: &str) -> Option<(Ipv4Addr, u16, u8)> {
    let (addr, proto) = match to.split_once('/') {
        Some((a, p)) => (a, ip_proto(&p.to_uppercase())?),
        None => (to, 6),
    };
    let (ip, port) = addr.split_once(':')?;
    Some((ip.parse().ok()?, port.parse().ok()?, proto))
}

/// Whether `ip:port` names a NIC rather than a Service frontend: no Service has it and
/// a NIC has the address (`trace web 10.1.0.3:80` judges that NIC's policy for port 80).
pub fn goes_to_a_nic(world: &World, (ip, port, proto): (Ipv4Addr, u16, u8)) -> bool {
    let service = world.services.iter().any(|s| {
        s.cluster_ips.iter().any(|c| c.parse() == Ok(ip))
            && s.ports
                .iter()
                .any(|p| p.port == port && ip_proto(&p.protocol) == Some(proto))
    });
    !service && world.objects.interfaces.iter().any(|n| n.ip() == Some(ip))
}

/// What a Node's datapath holds of a frontend and of the client's connections to it.
pub struct Datapath {
    /// `(id, backends)` of the frontend, when written.
    pub frontend: Option<(u32, u32)>,
    /// The client's connections to the frontend: (client port, backend, by affinity).
    pub connections: Vec<(u16, String, bool)>,
}

/// Reads `node`'s pinned maps for frontend `key` and client `client`, when they are on
/// this machine.
pub fn local_datapath(node: &str, key: &FrontendKey, client: Ipv4Addr) -> Option<Datapath> {
    let dir = crate::cli::node_dir(node);
    if !dir.exists() {
        return None;
    }
    let by_addr = crate::cli::Filter {
        addr: Some(key.ip),
        ..Default::default()
    };
    let frontend = crate::cli::dump_services(&dir, &by_addr)
        .ok()?
        .into_iter()
        .find(|r| r.port == key.port && ip_proto(&r.protocol.to_uppercase()) == Some(key.proto))
        .map(|r| (r.id, r.backends));
    let connections = crate::cli::dump_conntrack(&dir, &by_addr)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.direction == "original" && c.dst == format!("{}:{}", key.ip, key.port))
        .filter_map(|c| {
            let (src, port) = c.src.split_once(':')?;
            (src.parse::<Ipv4Addr>().ok()? == client).then(|| {
                let affinity = c.translated.ends_with("(affinity)");
                let backend = c.translated.trim_end_matches(" (affinity)").to_owned();
                (port.parse().unwrap_or(0), backend, affinity)
            })
        })
        .collect();
    Some(Datapath {
        frontend,
        connections,
    })
}

/// The steps of a connection from `from` (a Pod NIC) to the Service frontend `to`.
pub fn trace(
    world: &World,
    namespace: &str,
    from: &str,
    (ip, port, proto): (Ipv4Addr, u16, u8),
    datapath: &dyn Fn(&str, &FrontendKey, Ipv4Addr) -> Option<Datapath>,
) -> Result<Vec<Hop>, CliError> {
    let src = crate::cli::trace::source_nic(world, namespace, from)?;
    let hop = |node: &str, what: String| Hop {
        node: node.to_owned(),
        what,
    };
    let node = src.node.clone();
    let mut hops = vec![hop(
        &node,
        format!(
            "{} on the host veth of {} ({}) in {}, VNI {}",
            src.program, src.name, src.address, src.segment, src.vni
        ),
    )];
    let svc = world.services.iter().find(|s| {
        s.cluster_ips.iter().any(|c| c.parse() == Ok(ip))
            && s.ports
                .iter()
                .any(|p| p.port == port && ip_proto(&p.protocol) == Some(proto))
    });
    let Some(svc) = svc else {
        hops.push(hop(
            &node,
            format!(
                "no Service has the frontend {ip}:{port} (protocol {proto}): routed as any address"
            ),
        ));
        return Ok(hops);
    };
    hops.push(hop(&node, format!("{ip}:{port} is Service {}", svc.key())));
    let consumes = world
        .objects
        .vpc(&src.vpc)
        .and_then(|v| v.spec.service.as_ref())
        .is_some_and(|s| s.consume);
    if !consumes {
        hops.push(hop(
            &node,
            format!(
                "not translated: Vpc {:?} does not consume Services (spec.service.consume); \
                 routed as any address",
                src.vpc
            ),
        ));
        return Ok(hops);
    }
    let (want, skipped) = services::desired(world, &node);
    let key = FrontendKey { ip, port, proto };
    for line in skipped.iter().filter(|l| l.contains(&svc.key())) {
        hops.push(hop(&node, format!("left out: {line}")));
    }
    let front = want.frontends.get(&key).cloned().unwrap_or_default();
    if front.backends.is_empty() {
        hops.push(hop(
            &node,
            "no backend takes new connections (none ready, or all terminating): answered \
             with ICMP port unreachable from the ClusterIP (SVC_NO_ENDPOINTS)"
                .into(),
        ));
        return Ok(hops);
    }
    let list: Vec<String> = front
        .backends
        .iter()
        .map(|(a, p)| {
            let via = if want.host_backends.contains(a) {
                " (a Node's address: through the Node's stack from its Service source address)"
            } else {
                ""
            };
            format!("{a}:{p}{via}")
        })
        .collect();
    hops.push(hop(
        &node,
        format!(
            "a new connection gets one of {} backend(s): {}",
            list.len(),
            list.join(", ")
        ),
    ));
    hops.push(hop(
        &node,
        match front.affinity_s {
            Some(t) => format!(
                "why: sessionAffinity ClientIP ({t} s): the client's backend while it keeps \
                 coming, else the Maglev table's slot at the connection's flow hash"
            ),
            None => "why: the Service's Maglev table (1,021 slots, even shares) at the \
                     connection's flow hash; a removed backend moves only its own slots"
                .into(),
        },
    ));
    hops.extend(crate::cli::trace::backend_policy(
        world,
        &src,
        proto,
        &front.backends,
    ));
    match datapath(&node, &key, src.ip) {
        None => hops.push(hop(
            &node,
            "the Node's maps are not on this machine: run on that Node for its connections".into(),
        )),
        Some(dp) => {
            match dp.frontend {
                Some((id, n)) => hops.push(hop(
                    &node,
                    format!("jn_svc: frontend id {id}, {n} backend(s) written"),
                )),
                None => hops.push(hop(
                    &node,
                    "jn_svc: the frontend is not written yet (the daemon has not synced)".into(),
                )),
            }
            for (port, backend, affinity) in &dp.connections {
                hops.push(hop(
                    &node,
                    format!(
                        "jn_ct: connection from port {port} goes to {backend} ({})",
                        if *affinity {
                            "chosen by session affinity"
                        } else {
                            "chosen by the Maglev table"
                        }
                    ),
                ));
            }
        }
    }
    hops.push(hop(
        &node,
        "the reply gets the ClusterIP back as source where it is delivered (deliver_svc)".into(),
    ));
    Ok(hops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        EndpointSliceRecord, NetworkEndpoint, NetworkInterface, ServiceRecord, Subnet, Vpc,
        networkendpoint::NetworkEndpointSpec,
        networkinterface::{NetworkInterfaceSpec, NetworkInterfaceStatus, PodRef},
        service::{ServicePortRecord, SliceEndpoint, SlicePort, TargetPort},
        subnet::{SubnetSpec, SubnetStatus},
        vpc::{VpcService, VpcSpec},
    };

    fn world(consume: bool) -> World {
        let mut w = World::default();
        w.objects.vpcs.push(Vpc::new(
            "default",
            VpcSpec {
                service: Some(VpcService {
                    consume,
                    provider: None,
                }),
                ..Default::default()
            },
        ));
        let mut s = Subnet::new(
            "default",
            SubnetSpec {
                vpc: "default".into(),
                cidr: "10.16.0.0/16".into(),
                network_acl: None,
            },
        );
        s.status = Some(SubnetStatus {
            vni: 2,
            ..Default::default()
        });
        w.objects.subnets.push(s);
        for (pod, ip, node) in [("client", "10.16.0.5", "n1"), ("web", "10.16.0.6", "n2")] {
            let name = format!("{pod}.eth0");
            let mut nic = NetworkInterface::new(
                &name,
                NetworkInterfaceSpec {
                    interface: "eth0".into(),
                    subnet: Some("default".into()),
                    pod_ref: PodRef { name: pod.into() },
                    node_name: node.into(),
                    ..Default::default()
                },
            );
            nic.metadata.namespace = Some("default".into());
            nic.status = Some(NetworkInterfaceStatus {
                address: format!("{ip}/16").parse().ok(),
                vni: 2,
                ..Default::default()
            });
            w.objects.interfaces.push(nic);
            let mut ep = NetworkEndpoint::new(
                &name,
                NetworkEndpointSpec {
                    kind: "Pod".into(),
                    subnet: Some("default".into()),
                    address: format!("{ip}/16").parse().ok(),
                    node_name: node.into(),
                    ..Default::default()
                },
            );
            ep.metadata.namespace = Some("default".into());
            w.endpoints.push(ep);
        }
        w.services.push(ServiceRecord {
            namespace: "default".into(),
            name: "web".into(),
            cluster_ips: vec!["10.96.0.20".into()],
            ports: vec![ServicePortRecord {
                name: "http".into(),
                port: 80,
                protocol: "TCP".into(),
                target_port: TargetPort::Number(8080),
            }],
            kind: "ClusterIP".into(),
            ..Default::default()
        });
        w.endpoint_slices.push(EndpointSliceRecord {
            namespace: "default".into(),
            name: "web-1".into(),
            service: "web".into(),
            address_type: "IPv4".into(),
            managed_by: String::new(),
            ports: vec![SlicePort {
                name: "http".into(),
                port: 8080,
                protocol: "TCP".into(),
            }],
            endpoints: vec![SliceEndpoint {
                addresses: vec!["10.16.0.6".into()],
                ready: true,
                serving: true,
                terminating: false,
                node: "n2".into(),
                pod: None,
            }],
        });
        w
    }

    fn lines(hops: &[Hop]) -> String {
        hops.iter()
            .map(|h| format!("{} {}\n", h.node, h.what))
            .collect()
    }

    #[test]
    fn svc_01_a_trace_names_the_service_its_backends_and_each_connections_choice() {
        let frontend = parse_frontend("10.96.0.20:80").unwrap();
        let dp = |node: &str, key: &FrontendKey, client: Ipv4Addr| {
            assert_eq!(
                (node, key.port, client),
                ("n1", 80, "10.16.0.5".parse().unwrap())
            );
            Some(Datapath {
                frontend: Some((7, 1)),
                connections: vec![(40000, "10.16.0.6:8080".into(), false)],
            })
        };
        let text = lines(&trace(&world(true), "default", "client", frontend, &dp).unwrap());
        for want in [
            "n1 10.96.0.20:80 is Service default/web",
            "one of 1 backend(s): 10.16.0.6:8080",
            "Maglev table",
            "frontend id 7",
            "port 40000 goes to 10.16.0.6:8080 (chosen by the Maglev table)",
        ] {
            assert!(text.contains(want), "{want:?} in:\n{text}");
        }
        // A Vpc that does not consume: named, and nothing more.
        let text = lines(&trace(&world(false), "default", "client", frontend, &dp).unwrap());
        assert!(text.contains("does not consume Services"), "{text}");
        assert!(!text.contains("backend(s)"), "{text}");
        // No ready endpoint: the reject, named.
        let mut w = world(true);
        w.endpoint_slices[0].endpoints[0].ready = false;
        let text = lines(&trace(&w, "default", "client", frontend, &dp).unwrap());
        assert!(text.contains("SVC_NO_ENDPOINTS"), "{text}");
    }

    /// The client's Vpc under a SecurityGroup on the backend `web` (tcp `port` from the
    /// Subnet).
    fn guarded(port: u16) -> World {
        let mut w = world(true);
        let sg: crate::api::SecurityGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup",
            "metadata": {"name": "web"}, "spec": {"vpc": "default", "ingress": [
                {"from": [{"cidr": "10.16.0.0/16"}], "protocol": "tcp", "ports": [{"port": port}]}
            ]}, "status": {"groupID": 5}
        }))
        .unwrap();
        w.objects.security_groups.push(sg);
        w.objects.interfaces[1].spec.security_groups = vec!["web".into()];
        w
    }

    #[test]
    fn pol_03_trace_through_a_service_judges_the_backend_as_the_datapath_does() {
        let frontend = parse_frontend("10.96.0.20:80").unwrap();
        let none = |_: &str, _: &FrontendKey, _: Ipv4Addr| None;
        // The backend's own port (8080) is what its group is asked about.
        let text = lines(&trace(&guarded(8080), "default", "client", frontend, &none).unwrap());
        assert!(
            text.contains(
                "n2 to backend 10.16.0.6:8080: destination SG ingress (SecurityGroup web, set 5): \
                 allowed by rule 0"
            ),
            "{text}"
        );
        // A group that allows only the ClusterIP's port denies the translated packet.
        let text = lines(&trace(&guarded(80), "default", "client", frontend, &none).unwrap());
        assert!(
            text.contains(
                "n2 to backend 10.16.0.6:8080: destination SG ingress (SecurityGroup web, set 5): \
                 denied: no rule matched\nn2 to backend 10.16.0.6:8080: dropped: POLICY_SG_INGRESS"
            ),
            "{text}"
        );
        // Without groups or ACLs: no policy step.
        let text = lines(&trace(&world(true), "default", "client", frontend, &none).unwrap());
        assert!(!text.contains("to backend"), "{text}");
    }

    #[test]
    fn pol_03_trace_to_a_nic_address_with_a_port_is_not_a_service() {
        let w = world(true);
        assert!(!goes_to_a_nic(&w, parse_frontend("10.96.0.20:80").unwrap()));
        assert!(goes_to_a_nic(&w, parse_frontend("10.16.0.6:8080").unwrap()));
        assert!(!goes_to_a_nic(&w, parse_frontend("10.99.0.1:80").unwrap()));
    }

    #[test]
    fn svc_01_a_trace_target_reads_as_a_service_frontend() {
        assert_eq!(
            parse_frontend("10.96.0.10:53/udp"),
            Some(("10.96.0.10".parse().unwrap(), 53, 17))
        );
        assert_eq!(
            parse_frontend("10.96.0.1:443"),
            Some(("10.96.0.1".parse().unwrap(), 443, 6))
        );
        assert_eq!(parse_frontend("web"), None);
        assert_eq!(parse_frontend("10.96.0.1:443/icmp"), None);
    }
}
