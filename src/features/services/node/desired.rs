//! The frontends this Node's datapath holds, from the cluster's Services and
//! EndpointSlices (pure). kube-proxy's semantics: an endpoint takes new connections
//! when ready and not terminating; `internalTrafficPolicy: Local` keeps only the
//! client's Node's endpoints; a slice port is the Service port of the same name and
//! protocol. What Juneau does not serve is skipped and named, once per line, by the
//! feature that logs it:
//! - a Pod whose eth0 is on an L2Network or holds a direct ElasticIP is never a backend
//!   (SVC-04; seed 003);
//! - a backend outside every Subnet and L2Network (a Node's address, the API server)
//!   is reached through the Node's stack with the source translated to the Node's
//!   Service source address (SVC-02, `ServiceState::host_backends`); while this Node
//!   has none yet it is left out and named, never written as if it worked;
//! - a backend in another Vpc's Subnet is written as any Pod (reached from its own
//!   Vpc and the Vpcs routed to it); the source translation that lets other Vpcs reach
//!   it is not built yet;
//! - IPv6, headless and ExternalName Services, and protocols other than TCP, UDP, SCTP.
use std::{
    collections::{BTreeSet, HashMap},
    net::Ipv4Addr,
};

use super::{Frontend, FrontendKey, ServiceState};
use crate::{
    api::{
        EndpointSliceRecord, NetworkEndpoint, ServiceRecord,
        service::{ServicePortRecord, ip_proto},
    },
    cluster::World,
};

/// An EndpointSlice's address (Kubernetes' own type keeps it a string).
fn address(a: &str) -> Option<Ipv4Addr> {
    a.split('/').next()?.parse().ok()
}

/// What an endpoint address is to this datapath.
enum Kind {
    /// A Pod NIC on a Subnet: routed to; `provider`: a Subnet of a provider Vpc.
    Pod { provider: bool },
    /// Outside every segment: through the Node's stack (SVC-02).
    Host,
    /// Not a backend, and why.
    Refused(&'static str),
}

fn kind(at: &Here<'_>, ip: Ipv4Addr) -> Kind {
    match at.nics.get(&ip) {
        Some(e) if e.spec.elastic_ip.is_some() => {
            Kind::Refused("a NIC holding a direct ElasticIP is never a Service backend (SVC-04)")
        }
        Some(e) if e.spec.subnet.is_none() && e.spec.l2_network.is_some() => Kind::Refused(
            "a Pod whose eth0 is on an L2Network is never a Service backend (SVC-04, L2-27)",
        ),
        Some(e) => Kind::Pod {
            provider: e
                .spec
                .subnet
                .as_deref()
                .is_some_and(|s| at.provider_subnets.contains(s)),
        },
        None if at.segments.iter().any(|c| c.contains(&ip)) => Kind::Refused(
            "no Pod NIC holds this address of a segment (yet): not a backend until one does",
        ),
        None if at.has_source => Kind::Host,
        None => Kind::Refused(
            "a backend outside every Subnet (a Node's address) is reached with this Node's \
             Service source address (SVC-02), which it has not been given yet",
        ),
    }
}

/// This Node's Service source address, and the other Nodes' (address, VTEP).
pub type Sources = (Option<Ipv4Addr>, Vec<(Ipv4Addr, Ipv4Addr)>);

/// This Node's Service source address and the other Nodes' (address, VTEP), from the
/// provider Subnets' `status.nodeAddresses` (SVC-02).
pub fn sources(world: &World, node: &str) -> Sources {
    let mut own = None;
    let mut others = Vec::new();
    for a in world
        .objects
        .subnets
        .iter()
        .filter_map(|s| s.status.as_ref())
        .flat_map(|s| &s.node_addresses)
    {
        let Some(ip) = a.address else {
            continue;
        };
        if a.node == node {
            own.get_or_insert(ip);
        } else if let Some(vtep) = a.node_ip {
            others.push((ip, vtep));
        }
    }
    others.sort();
    others.dedup();
    (own, others)
}

/// The VNI of the provider Vpc's `natSourceSubnet` (SVC-02): a connection from another
/// Vpc to a provider Pod is routed by that segment's table. 0 while it has none.
pub fn provider_vni(world: &World) -> u32 {
    crate::features::services::source::source_subnets(&world.objects)
        .iter()
        .filter_map(|name| world.objects.subnet(name)?.status.as_ref().map(|s| s.vni))
        .find(|v| *v != 0)
        .unwrap_or(0)
}

/// Where the frontends are computed for, read once per sync: the Node, whether it has
/// a Service source address, every Pod NIC by address and every segment's CIDR (each
/// endpoint is classified by a lookup, not a scan of the cluster).
struct Here<'a> {
    node: &'a str,
    has_source: bool,
    /// The Subnets of the provider Vpcs (`spec.service.provider`).
    provider_subnets: BTreeSet<&'a str>,
    nics: HashMap<Ipv4Addr, &'a NetworkEndpoint>,
    segments: Vec<ipnet::Ipv4Net>,
}

impl<'a> Here<'a> {
    fn new(world: &'a World, node: &'a str) -> Self {
        let objects = &world.objects;
        Here {
            node,
            has_source: sources(world, node).0.is_some(),
            provider_subnets: objects
                .subnets
                .iter()
                .filter(|s| {
                    objects
                        .vpc(&s.spec.vpc)
                        .and_then(|v| v.spec.service.as_ref())
                        .is_some_and(|svc| svc.provider.is_some())
                })
                .filter_map(|s| s.metadata.name.as_deref())
                .collect(),
            nics: world
                .endpoints
                .iter()
                .filter_map(|e| Some((e.spec.address?.addr(), e)))
                .collect(),
            segments: objects
                .subnets
                .iter()
                .filter_map(|s| s.prefix())
                .chain(objects.l2networks.iter().filter_map(|l| l.prefix()))
                .collect(),
        }
    }
}

/// The backends of one Service port, and the lines of what was left out.
fn backends(
    at: &Here<'_>,
    svc: &ServiceRecord,
    port: &ServicePortRecord,
    slices: &[&EndpointSliceRecord],
    kinds: (&mut BTreeSet<Ipv4Addr>, &mut BTreeSet<Ipv4Addr>),
    skipped: &mut Vec<String>,
) -> Vec<(Ipv4Addr, u16)> {
    let (hosts, providers) = kinds;
    let mut out = Vec::new();
    for slice in slices {
        let Some(sp) = slice
            .ports
            .iter()
            .find(|p| p.name == port.name && p.protocol == port.protocol)
        else {
            continue;
        };
        for ep in &slice.endpoints {
            if !ep.ready || ep.terminating {
                continue;
            }
            if svc.internal_local && ep.node != at.node {
                continue;
            }
            for a in &ep.addresses {
                let Some(ip) = address(a) else { continue };
                match kind(at, ip) {
                    Kind::Pod { provider } => {
                        if provider {
                            providers.insert(ip);
                        }
                        out.push((ip, sp.port));
                    }
                    Kind::Host => {
                        hosts.insert(ip);
                        out.push((ip, sp.port));
                    }
                    Kind::Refused(why) => skipped.push(format!(
                        "Service {} endpoint {ip} (slice {}): {why}",
                        svc.key(),
                        slice.name
                    )),
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Every frontend of the cluster's Services for Node `node`, with the lines of what it
/// left out.
pub fn desired(world: &World, node: &str) -> (ServiceState, Vec<String>) {
    let mut state = ServiceState::default();
    let mut skipped = Vec::new();
    let here = Here::new(world, node);
    // Each Service's IPv4 slices, found by a lookup.
    let mut slices_of: HashMap<(&str, &str), Vec<&EndpointSliceRecord>> = HashMap::new();
    for s in world
        .endpoint_slices
        .iter()
        .filter(|s| s.address_type == "IPv4")
    {
        slices_of
            .entry((s.namespace.as_str(), s.service.as_str()))
            .or_default()
            .push(s);
    }
    for svc in &world.services {
        if svc.kind == "ExternalName" {
            continue;
        }
        let ips: Vec<Ipv4Addr> = svc
            .cluster_ips
            .iter()
            .filter(|ip| !ip.is_empty() && *ip != "None")
            .filter_map(|ip| match ip.parse::<Ipv4Addr>() {
                Ok(v4) => Some(v4),
                Err(_) => {
                    skipped.push(format!(
                        "Service {} ClusterIP {ip}: only IPv4 ClusterIPs are served",
                        svc.key()
                    ));
                    None
                }
            })
            .collect();
        if ips.is_empty() {
            continue;
        }
        let slices = slices_of
            .get(&(svc.namespace.as_str(), svc.name.as_str()))
            .map_or(&[][..], Vec::as_slice);
        for port in &svc.ports {
            let Some(proto) = ip_proto(&port.protocol) else {
                skipped.push(format!(
                    "Service {} port {}/{}: protocol not served",
                    svc.key(),
                    port.port,
                    port.protocol
                ));
                continue;
            };
            let frontend = Frontend {
                backends: backends(
                    &here,
                    svc,
                    port,
                    slices,
                    (&mut state.host_backends, &mut state.provider_backends),
                    &mut skipped,
                ),
                affinity_s: svc.affinity_s,
            };
            for ip in &ips {
                state.frontends.insert(
                    FrontendKey {
                        ip: *ip,
                        port: port.port,
                        proto,
                    },
                    frontend.clone(),
                );
            }
        }
    }
    (state, skipped)
}
