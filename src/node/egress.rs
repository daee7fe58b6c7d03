//! The ways out of a Vpc as the cluster states them, read alike by the router (the
//! routes it writes via a NATGateway or the internet gateway), the ElasticIPs (the
//! 1:1 mappings a port carries) and `kubectl juneau trace` (which explains them): this
//! Node's address on an ExternalNetwork, the NATGateway a NIC without an ElasticIP
//! leaves by, the cluster's own ranges never sent out, the ElasticIPs attached to
//! Subnet NICs.
use std::{collections::BTreeSet, net::Ipv4Addr};

use ipnet::Ipv4Net;

use crate::{
    api::{DEFAULT_VPC, externalnetworkattachment::name_for},
    cluster::World,
    node::dataplane::Holder,
};

/// What a NIC of `vpc` without an ElasticIP attached leaves the internet gateway by on
/// `node`: the Vpc's first NATGateway (by name) with an address there, and that address.
pub fn internet_gateway_fallback<'w>(
    world: &'w World,
    node: &str,
    vpc: &str,
) -> Option<(&'w crate::api::NATGateway, Ipv4Addr)> {
    let mut gateways: Vec<_> = world
        .objects
        .nat_gateways
        .iter()
        .filter(|g| g.spec.vpc == vpc)
        .collect();
    gateways.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    gateways
        .into_iter()
        .find_map(|g| Some((g, address_of(world, &g.spec.external_network, node)?)))
}

/// This Node's address on `external_network`, once its attachment has one.
pub fn address_of(world: &World, external_network: &str, node: &str) -> Option<Ipv4Addr> {
    world
        .objects
        .external_network_attachment(&name_for(external_network, node))
        .filter(|a| a.spec.node_name == node && a.spec.external_network == external_network)
        .and_then(|a| a.status.as_ref()?.assigned_ip)
}

/// The cluster's own ranges a table routing out through a NATGateway (or the internet
/// gateway) must not send out.
pub fn cluster_ranges(world: &World, vpc: &str) -> BTreeSet<Ipv4Net> {
    let objects = &world.objects;
    let services = objects.service_cidrs.iter().copied();
    let nodes = world
        .nodes
        .iter()
        .filter_map(|n| n.internal_ip.parse::<Ipv4Addr>().ok())
        .chain(world.endpoints.iter().filter_map(|e| e.spec.node_ip))
        .filter_map(|a| Ipv4Net::new(a, 32).ok());
    // The cluster's Pod network, for a tenant Vpc (the default Vpc routes its own).
    let pods = objects
        .subnets
        .iter()
        .filter(|s| s.spec.vpc == DEFAULT_VPC && vpc != DEFAULT_VPC)
        .filter_map(|s| s.prefix());
    services
        .chain(nodes)
        .chain(pods)
        .map(|n| n.trunc())
        .collect()
}

/// The ElasticIPs attached to Subnet NICs (NAT-03): those whose status names an
/// ElasticIPAttachment the controller reports `Attached`, held by that attachment's
/// NIC (its NetworkEndpoint: MAC and Node; its status: the Subnet's VNI) at the Pod's
/// address the attachment reports.
pub fn attached(world: &World) -> impl Iterator<Item = (Ipv4Addr, Holder)> + '_ {
    let objects = &world.objects;
    objects.elastic_ip_attachments.iter().filter_map(move |a| {
        let ns = a.metadata.namespace.as_deref().unwrap_or("default");
        let st = a.status.as_ref().filter(|s| s.phase == "Attached")?;
        let eip = objects.elastic_ip(ns, &a.spec.elastic_ip_ref.name)?;
        let by = eip.status.as_ref()?.attachment.as_ref()?;
        if by.kind != "ElasticIPAttachment" || Some(&by.name) != a.metadata.name.as_ref() {
            return None;
        }
        let nic_name = &a.spec.target_ref.network_interface_name;
        let in_ns = |m: &kube::api::ObjectMeta| {
            m.namespace.as_deref().unwrap_or("default") == ns && m.name.as_deref() == Some(nic_name)
        };
        // The NIC's endpoint at the address the attachment reports: a NIC made again
        // under the same name waits for the controller's next pass.
        let ep = world.endpoints.iter().find(|e| {
            in_ns(&e.metadata)
                && st.pod_ip.is_some()
                && e.spec.address.map(|a| a.addr()) == st.pod_ip
        })?;
        let vni = objects
            .interfaces
            .iter()
            .find(|n| in_ns(&n.metadata))?
            .status
            .as_ref()?
            .vni;
        let holder = Holder {
            mac: ep.spec.mac_address?.0,
            vni,
            node: ep.spec.node_ip?,
            pod_ip: Some(st.pod_ip?),
        };
        (vni != 0).then_some((st.elastic_ip?, holder))
    })
}
