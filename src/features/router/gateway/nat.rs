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
    cluster::World,
    node::egress::{address_of, cluster_ranges, internet_gateway_fallback},
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

/// Whether a route translates what it carries out of the cluster.
fn translated(kind: u32) -> bool {
    kind == ROUTE_NAT_GW || kind == ROUTE_INTERNET_GW
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
