//! The routes of the router's tables: a Vpc's implicit table (its segments' CIDRs),
//! each RouteTable's routes as this Node resolves them, and the Service CIDRs held in
//! a table of a Vpc that does not consume Services.
use std::{collections::BTreeSet, net::Ipv4Addr};

use ipnet::Ipv4Net;
use juneau_common::gw::{
    ROUTE_CONNECTED, ROUTE_ENDPOINT, ROUTE_NO_NEXT_HOP, ROUTE_NO_SERVICES, ROUTE_UNSUPPORTED,
};

use super::{GatewaySegment, RouteSpec, gateway_of, name, nat, subnet_segment};
use crate::{
    api::{RouteTable, routetable::Route},
    cluster::World,
};

/// A connected route to a segment.
pub(super) fn connected((vni, seg): (u32, GatewaySegment), dst: Ipv4Net) -> RouteSpec {
    RouteSpec {
        dst,
        kind: ROUTE_CONNECTED,
        vni,
        gw_ip: seg.gw_ip,
        gw_mac: seg.gw_mac,
        mtu: seg.mtu,
        nh_ip: Ipv4Addr::UNSPECIFIED,
    }
}

fn unsupported(dst: Ipv4Net) -> RouteSpec {
    RouteSpec::dropping(dst, ROUTE_UNSUPPORTED)
}

/// A route via an endpoint: `<namespace>/<pod>.<iface>`, a NIC on a routed segment of
/// the table's Vpc, found by its NetworkEndpoint (every Node reads all of them; a
/// daemon sees only its own Node's NetworkInterfaces). One that is not there (yet)
/// drops what it matches (`NO_NEXT_HOP`) rather than let a shorter route take it.
fn via_endpoint(world: &World, rt: &RouteTable, dst: Ipv4Net, endpoint: &str) -> RouteSpec {
    let objects = &world.objects;
    let found = endpoint.split_once('/').and_then(|(ns, name)| {
        world.endpoints.iter().find(|e| {
            e.metadata.namespace.as_deref() == Some(ns) && e.metadata.name.as_deref() == Some(name)
        })
    });
    let hop = found.and_then(|e| {
        let segment = match (&e.spec.subnet, &e.spec.l2_network) {
            (Some(s), _) => objects
                .subnet(s)
                .filter(|s| s.spec.vpc == rt.spec.vpc)
                .and_then(subnet_segment),
            (None, Some(l)) => objects
                .l2network(l)
                .filter(|l| l.spec.vpc == rt.spec.vpc)
                .and_then(gateway_of),
            (None, None) => None,
        }?;
        let nh = e.spec.address?.addr();
        Some(RouteSpec {
            kind: ROUTE_ENDPOINT,
            nh_ip: nh,
            ..connected(segment, dst)
        })
    });
    hop.unwrap_or_else(|| RouteSpec::dropping(dst, ROUTE_NO_NEXT_HOP))
}

/// The connected routes of the implicit table of `vpc`: each of its segments' CIDRs.
pub(super) fn implicit_routes(world: &World, vpc: &str) -> BTreeSet<RouteSpec> {
    let objects = &world.objects;
    let l2 = objects
        .l2networks
        .iter()
        .filter(|l| l.spec.vpc == vpc)
        .filter_map(|l| Some(connected(gateway_of(l)?, l.prefix()?)));
    let subnets = objects
        .subnets
        .iter()
        .filter(|s| s.spec.vpc == vpc)
        .filter_map(|s| Some(connected(subnet_segment(s)?, s.prefix()?)));
    l2.chain(subnets).collect()
}

/// One route of a RouteTable, or the line that says why it is left out.
pub(super) fn table_route(
    world: &World,
    node: &str,
    rt: &RouteTable,
    r: &Route,
) -> Result<RouteSpec, String> {
    let objects = &world.objects;
    let table = rt.metadata.name.as_deref().unwrap_or("");
    let dst = r
        .dst
        .parse::<Ipv4Net>()
        .map_err(|_| {
            format!(
                "RouteTable {table}: route dst {:?} is not an IPv4 prefix",
                r.dst
            )
        })?
        .trunc();
    match (r.via.type_.as_str(), &r.via.endpoint) {
        ("connected", _) => {}
        ("endpoint", Some(endpoint)) => return Ok(via_endpoint(world, rt, dst, endpoint)),
        ("endpoint", None) => return Ok(RouteSpec::dropping(dst, ROUTE_NO_NEXT_HOP)),
        ("natGateway", _) => {
            return nat::via_nat_gateway(
                world,
                node,
                &rt.spec.vpc,
                dst,
                r.via.nat_gateway.as_deref(),
            )
            .map_err(|e| format!("RouteTable {table}: {e}"));
        }
        ("internetGateway", _) => {
            return Ok(nat::via_internet_gateway(world, node, &rt.spec.vpc, dst));
        }
        // Kinds of later waves (peering, transit, VPN): dropped as ROUTE_UNSUPPORTED,
        // never sent by a shorter route instead.
        _ => return Ok(unsupported(dst)),
    }
    let l2 = r
        .via
        .l2_network
        .as_deref()
        .and_then(|n| objects.l2network(n).filter(|l| l.spec.vpc == rt.spec.vpc));
    let subnet = r
        .via
        .subnet
        .as_deref()
        .and_then(|n| objects.subnet(n).filter(|s| s.spec.vpc == rt.spec.vpc));
    let segment = match (l2, subnet) {
        (Some(l), _) => gateway_of(l).ok_or_else(|| {
            format!(
                "RouteTable {table}: route to {dst} names L2Network {} which has no gateway yet",
                name(l)
            )
        })?,
        (None, Some(s)) => subnet_segment(s).ok_or_else(|| {
            format!(
                "RouteTable {table}: route to {dst} names Subnet {} which has no VNI yet",
                s.metadata.name.as_deref().unwrap_or("")
            )
        })?,
        // A connected route to nothing of this Vpc routes nowhere.
        (None, None) => return Ok(unsupported(dst)),
    };
    Ok(connected(segment, dst))
}

/// The Service CIDRs in a table of a Vpc that does not consume Services: refused by
/// name at once (SVC-01), unless the table routes the very prefix itself.
pub(super) fn hold_services(world: &World, routes: &mut BTreeSet<RouteSpec>) {
    for dst in world.objects.service_cidrs.iter().map(|n| n.trunc()) {
        if !routes.iter().any(|r| r.dst == dst) {
            routes.insert(RouteSpec::dropping(dst, ROUTE_NO_SERVICES));
        }
    }
}
