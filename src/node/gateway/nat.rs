//! Routes via a NATGateway (NAT-01), as this Node's router holds them: the route
//! carries this Node's own address on the gateway's ExternalNetwork (its
//! ExternalNetworkAttachment's `status.assignedIP`), so every Node translates its own
//! Pods' connections and the value differs per Node. Without an address here yet the
//! route still matches and drops by name (`NAT_NO_ADDRESS`), never falling to a
//! shorter route.
//!
//! A route via the internet gateway (NAT-03) falls back to the Vpc's NATGateway for a
//! NIC without an ElasticIP attached: it carries the same address, of the first
//! NATGateway of the Vpc (by name) that has one on this Node, or 0, refused by name
//! (`IGW_NO_PUBLIC_ADDRESS`).
//!
//! A table with such a route also gets the cluster's own ranges (Service CIDRs, the
//! Nodes' addresses, the default Vpc's Pod network) as unreachable, unless a route of
//! its own (not the NATGateway's) covers the range: what is meant for the cluster is
//! never translated out, and a tenant's own addresses stay its own.
use std::{collections::BTreeSet, net::Ipv4Addr};

use ipnet::Ipv4Net;
use juneau_common::gw::{ROUTE_INTERNET_GW, ROUTE_NAT_GW, ROUTE_UNREACHABLE};

use super::RouteSpec;
use crate::{
    api::{DEFAULT_VPC, externalnetworkattachment::name_for},
    cluster::World,
};

/// The route to `dst` via NATGateway `name` for a table of `vpc`, on `node`.
pub fn via_nat_gateway(
    world: &World,
    node: &str,
    vpc: &str,
    dst: Ipv4Net,
    name: Option<&str>,
) -> Result<RouteSpec, String> {
    let objects = &world.objects;
    let Some(g) = name.and_then(|n| objects.nat_gateway(n)) else {
        return Err(format!(
            "route to {dst} names NATGateway {name:?}, which does not exist"
        ));
    };
    if g.spec.vpc != vpc {
        return Err(format!(
            "route to {dst} names NATGateway {name:?} of Vpc {:?}, not of {vpc:?}",
            g.spec.vpc
        ));
    }
    let address = address_of(world, &g.spec.external_network, node);
    Ok(RouteSpec {
        nh_ip: address.unwrap_or(Ipv4Addr::UNSPECIFIED),
        ..RouteSpec::dropping(dst, ROUTE_NAT_GW)
    })
}

/// The route to `dst` via the internet gateway of `vpc`, on `node`.
pub fn via_internet_gateway(world: &World, node: &str, vpc: &str, dst: Ipv4Net) -> RouteSpec {
    let address = internet_gateway_fallback(world, node, vpc).map(|(_, a)| a);
    RouteSpec {
        nh_ip: address.unwrap_or(Ipv4Addr::UNSPECIFIED),
        ..RouteSpec::dropping(dst, ROUTE_INTERNET_GW)
    }
}

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

/// Whether a route translates what it carries out of the cluster.
fn translated(kind: u32) -> bool {
    kind == ROUTE_NAT_GW || kind == ROUTE_INTERNET_GW
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
        .filter_map(|s| s.spec.cidr.parse::<Ipv4Net>().ok());
    services
        .chain(nodes)
        .chain(pods)
        .map(|n| n.trunc())
        .collect()
}

/// Adds the cluster's ranges as unreachable to `routes` when one of them goes via a
/// NATGateway or the internet gateway and the table does not route the prefix itself.
pub fn hold_cluster_ranges(world: &World, vpc: &str, routes: &mut BTreeSet<RouteSpec>) {
    if !routes.iter().any(|r| translated(r.kind)) {
        return;
    }
    for dst in cluster_ranges(world, vpc) {
        // The table's own routes win: the same prefix, or one of its segments (or
        // routes) whose space holds the range (a tenant may use any addresses, a
        // Node's among them).
        let own = routes
            .iter()
            .any(|r| !translated(r.kind) && r.dst.contains(&dst));
        if !own {
            routes.insert(RouteSpec::dropping(dst, ROUTE_UNREACHABLE));
        }
    }
}
