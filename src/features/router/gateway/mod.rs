//! The Vpc router every Node runs: what its maps should hold, computed from the
//! cluster alone (pure; [`crate::node::dataplane`] writes it). Every Node holds every
//! routed segment (every Subnet, and every L2Network with a gateway), RouteTable and
//! neighbour of the cluster, because any of its
//! workloads may route to any segment of its Vpc, whether or not the Node has a port
//! there.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use ipnet::Ipv4Net;
use juneau_common::svc::SVC_SOURCE_MAC;

use crate::{
    api::{L2Network, NetworkEndpoint, Subnet},
    cluster::World,
};

mod nat;
mod routes;

pub use nat::via_internet_gateway;
use routes::{hold_services, implicit_routes, table_route};

/// One gateway segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewaySegment {
    pub gw_ip: Ipv4Addr,
    pub gw_mac: [u8; 6],
    pub mtu: u32,
    /// The length of the segment's CIDR.
    pub prefix_len: u32,
    /// The RouteTable it routes by (a key of [`RouterState::tables`]).
    pub table: String,
    /// Its Vpc consumes the cluster's Services (`spec.service.consume`, SVC-01).
    pub services: bool,
    /// Its Vpc is the Services' provider (`spec.service.provider`: the default Vpc,
    /// whose Pods back them); a client elsewhere gets its source translated (SVC-02).
    pub provider: bool,
    /// Its NetworkACL's rule set (`node::policy::acl_set`), 0 for none.
    pub acl: u32,
}

/// One route of a table, as the datapath holds it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RouteSpec {
    pub dst: Ipv4Net,
    /// `ROUTE_*`.
    pub kind: u32,
    /// For connected and endpoint routes: the segment's VNI, gateway address, MAC and
    /// MTU (of the segment the packet leaves into).
    pub vni: u32,
    pub gw_ip: Ipv4Addr,
    pub gw_mac: [u8; 6],
    pub mtu: u32,
    /// For endpoint routes: the next hop's address in that segment.
    pub nh_ip: Ipv4Addr,
}

impl RouteSpec {
    /// A route that drops what it matches, under `kind`'s drop reason.
    pub fn dropping(dst: Ipv4Net, kind: u32) -> Self {
        Self {
            dst,
            kind,
            vni: 0,
            gw_ip: Ipv4Addr::UNSPECIFIED,
            gw_mac: [0; 6],
            mtu: 0,
            nh_ip: Ipv4Addr::UNSPECIFIED,
        }
    }
}

/// A neighbour Juneau handed out: its MAC and the VTEP of its Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub mac: [u8; 6],
    pub vtep: Ipv4Addr,
}

/// Everything the router maps hold on every Node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouterState {
    /// By VNI.
    pub segments: BTreeMap<u32, GatewaySegment>,
    /// By table name: its routes, most specific first within equal prefixes.
    pub tables: BTreeMap<String, BTreeSet<RouteSpec>>,
    /// By (VNI, address).
    pub neighbours: BTreeMap<(u32, Ipv4Addr), Neighbour>,
}

impl RouterState {
    /// The gateway MAC of the segment `vni`, when it has a gateway.
    pub fn gateway_mac(&self, vni: u32) -> Option<[u8; 6]> {
        self.segments.get(&vni).map(|s| s.gw_mac)
    }
}

/// The MTU of a Subnet: its NICs keep the kernel's default (L2-21).
pub const SUBNET_MTU: u32 = 1500;

fn name(l: &L2Network) -> &str {
    l.metadata.name.as_deref().unwrap_or("")
}

/// A segment the router serves: an L2Network with a gateway, a VNI and a well-formed
/// status.
fn gateway_of(l: &L2Network) -> Option<(u32, GatewaySegment)> {
    l.spec.gateway.as_ref()?;
    let st = l.status.as_ref()?;
    if st.vni == 0 {
        return None;
    }
    let cidr = l.prefix()?;
    Some((
        st.vni,
        GatewaySegment {
            gw_ip: st.gateway?,
            gw_mac: st.gateway_mac?.0,
            mtu: st.mtu,
            prefix_len: cidr.prefix_len() as u32,
            table: String::new(),
            services: false,
            provider: false,
            acl: 0,
        },
    ))
}

/// Every Subnet with a VNI and a gateway is a segment of the router.
fn subnet_segment(s: &Subnet) -> Option<(u32, GatewaySegment)> {
    let st = s.status.as_ref()?;
    if st.vni == 0 {
        return None;
    }
    let cidr = s.prefix()?;
    Some((
        st.vni,
        GatewaySegment {
            gw_ip: st.gateway?,
            gw_mac: st.gateway_mac?.0,
            mtu: SUBNET_MTU,
            prefix_len: cidr.prefix_len() as u32,
            table: String::new(),
            services: false,
            provider: false,
            acl: 0,
        },
    ))
}

/// Whether `vpc`'s Pods reach ClusterIPs: `spec.service.consume` (the default Vpc is
/// made with it; a Vpc without `spec.service` reaches none).
fn consumes_services(world: &World, vpc: &str) -> bool {
    world
        .objects
        .vpc(vpc)
        .and_then(|v| v.spec.service.as_ref())
        .is_some_and(|s| s.consume)
}

/// Whether `vpc` provides the Services (its Pods back them: `spec.service.provider`).
fn provides_services(world: &World, vpc: &str) -> bool {
    world
        .objects
        .vpc(vpc)
        .and_then(|v| v.spec.service.as_ref())
        .is_some_and(|s| s.provider.is_some())
}

/// Every Node's Service source address as a neighbour in its Subnet's segment
/// (SVC-02): [`SVC_SOURCE_MAC`] at that Node's VTEP, so that a provider Pod's reply to
/// a client of another Vpc reaches `svc_host` there.
fn service_sources(world: &World, state: &mut RouterState) {
    for s in &world.objects.subnets {
        let Some(st) = s.status.as_ref().filter(|st| st.vni != 0) else {
            continue;
        };
        for a in &st.node_addresses {
            let (Some(ip), Some(vtep)) = (a.address, a.node_ip) else {
                continue;
            };
            state.neighbours.insert(
                (st.vni, ip),
                Neighbour {
                    mac: SVC_SOURCE_MAC,
                    vtep,
                },
            );
        }
    }
}

/// A neighbour's key in [`RouterState::neighbours`]: (VNI, address).
type NbrAt = (u32, Ipv4Addr);

/// The neighbour a NetworkEndpoint seeds; `Ok(None)` when its segment is not routed.
fn neighbour(world: &World, e: &NetworkEndpoint) -> Result<Option<(NbrAt, Neighbour)>, String> {
    let objects = &world.objects;
    let l2 = e
        .spec
        .l2_network
        .as_deref()
        .and_then(|n| objects.l2network(n));
    let subnet = e.spec.subnet.as_deref().and_then(|n| objects.subnet(n));
    let Some((vni, _)) = l2
        .and_then(gateway_of)
        .or_else(|| subnet.and_then(subnet_segment))
    else {
        return Ok(None);
    };
    match (e.spec.address, e.spec.mac_address, e.spec.node_ip) {
        (Some(ip), Some(mac), Some(vtep)) => {
            Ok(Some(((vni, ip.addr()), Neighbour { mac: mac.0, vtep })))
        }
        _ => Err(format!(
            "NetworkEndpoint {}/{}: its address, MAC or Node address is unset",
            e.metadata.namespace.as_deref().unwrap_or(""),
            e.metadata.name.as_deref().unwrap_or(""),
        )),
    }
}

/// The other Nodes that route: every Node with an endpoint (a Node without any has no
/// workload to route for), by VTEP (host order). The listeners of gateway segments.
pub fn listen_nodes(world: &World, this_node: &str) -> BTreeSet<u32> {
    world
        .endpoints
        .iter()
        .filter(|e| e.spec.node_name != this_node)
        .filter_map(|e| e.spec.node_ip)
        .map(Ipv4Addr::to_bits)
        .collect()
}

/// What `node`'s router holds for `world` (the same on every Node but the routes via a
/// NATGateway, which carry each Node's own address), and a line for each object it
/// could not use (logged by the caller; nothing half-applied: such a route or
/// neighbour is left out whole).
pub fn desired(world: &World, node: &str) -> (RouterState, Vec<String>) {
    let objects = &world.objects;
    let mut state = RouterState::default();
    let mut skipped = Vec::new();
    for l in &objects.l2networks {
        if let Some((vni, mut seg)) = gateway_of(l) {
            let own = l.spec.gateway.as_ref().and_then(|g| g.route_table.clone());
            seg.table = world.objects.table_of(&l.spec.vpc, own);
            seg.services = consumes_services(world, &l.spec.vpc);
            seg.provider = provides_services(world, &l.spec.vpc);
            seg.acl = world.objects.acl_set(l.spec.network_acl.as_deref());
            state.segments.insert(vni, seg);
        }
    }
    for s in &objects.subnets {
        if let Some((vni, mut seg)) = subnet_segment(s) {
            seg.table = world.objects.table_of(&s.spec.vpc, None);
            seg.services = consumes_services(world, &s.spec.vpc);
            seg.provider = provides_services(world, &s.spec.vpc);
            seg.acl = world.objects.acl_set(s.spec.network_acl.as_deref());
            state.segments.insert(vni, seg);
        }
    }
    // Tables in use, each from its RouteTable, or the implicit one of its Vpc.
    let used: BTreeSet<String> = state.segments.values().map(|s| s.table.clone()).collect();
    for table in used {
        let mut routes = if let Some(vpc) = table.strip_prefix("vpc:") {
            let mut routes = implicit_routes(world, vpc);
            // The default NATGateway's route, where the default Vpc has no RouteTable
            // for the controller to write it into (NAT-01).
            if vpc == crate::api::DEFAULT_VPC && default_nat_ready(world) {
                let r = crate::api::routetable::Route::default_nat();
                if let Some(dst) = r.prefix() {
                    match nat::via_nat_gateway(world, node, vpc, dst, r.via.nat_gateway.as_deref())
                    {
                        Ok(route) => {
                            routes.insert(route);
                        }
                        Err(line) => skipped.push(line),
                    }
                }
            }
            routes
        } else if let Some(rt) = objects
            .route_tables
            .iter()
            .find(|rt| rt.metadata.name.as_deref() == Some(table.as_str()))
        {
            let mut routes = BTreeSet::new();
            for r in &rt.spec.routes {
                match table_route(world, node, rt, r) {
                    Ok(route) => {
                        routes.insert(route);
                    }
                    Err(line) => skipped.push(line),
                }
            }
            routes
        } else {
            BTreeSet::new()
        };
        let vpc = table_vpc(world, &table);
        if !consumes_services(world, &vpc) {
            hold_services(world, &mut routes);
        }
        nat::hold_cluster_ranges(world, &vpc, &mut routes);
        state.tables.insert(table, routes);
    }
    service_sources(world, &mut state);
    for e in &world.endpoints {
        match neighbour(world, e) {
            Ok(Some((key, n))) => {
                state.neighbours.insert(key, n);
            }
            Ok(None) => {}
            Err(line) => skipped.push(line),
        }
    }
    (state, skipped)
}

/// The Vpc a table (a RouteTable's name, or `vpc:<name>`) belongs to.
fn table_vpc(world: &World, table: &str) -> String {
    table.strip_prefix("vpc:").map_or_else(
        || {
            world
                .objects
                .route_table(table)
                .map(|rt| rt.spec.vpc.clone())
                .unwrap_or_default()
        },
        str::to_owned,
    )
}

/// The NATGateway `default` of the default Vpc is Ready (its status, as the
/// controller wrote it).
fn default_nat_ready(world: &World) -> bool {
    use crate::api::natgateway::DEFAULT_NAT_GATEWAY;
    world
        .objects
        .nat_gateway(DEFAULT_NAT_GATEWAY)
        .filter(|g| g.spec.vpc == crate::api::DEFAULT_VPC)
        .and_then(|g| g.status.as_ref())
        .is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

#[cfg(test)]
mod tests;
