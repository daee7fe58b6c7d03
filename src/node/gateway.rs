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
use juneau_common::gw::{ROUTE_CONNECTED, ROUTE_ENDPOINT, ROUTE_NO_NEXT_HOP, ROUTE_UNSUPPORTED};

use crate::{
    api::{L2Network, NetworkEndpoint, RouteTable, Subnet, routetable::Route},
    cluster::World,
};

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
    let cidr: Ipv4Net = l.spec.cidr.as_deref()?.parse().ok()?;
    Some((
        st.vni,
        GatewaySegment {
            gw_ip: st.gateway.parse().ok()?,
            gw_mac: crate::parse_mac(&st.gateway_mac)?,
            mtu: st.mtu,
            prefix_len: cidr.prefix_len() as u32,
            table: String::new(),
        },
    ))
}

/// Every Subnet with a VNI and a gateway is a segment of the router.
fn subnet_segment(s: &Subnet) -> Option<(u32, GatewaySegment)> {
    let st = s.status.as_ref()?;
    if st.vni == 0 {
        return None;
    }
    let cidr: Ipv4Net = s.spec.cidr.parse().ok()?;
    Some((
        st.vni,
        GatewaySegment {
            gw_ip: st.gateway.parse().ok()?,
            gw_mac: crate::parse_mac(&st.gateway_mac)?,
            mtu: SUBNET_MTU,
            prefix_len: cidr.prefix_len() as u32,
            table: String::new(),
        },
    ))
}

/// The table a segment of `vpc` routes by: its own (`gateway.routeTable` of an
/// L2Network), else its Vpc's main table (`status.mainRouteTable`, else the RouteTable
/// named as the Vpc), else the Vpc's implicit table (`vpc:<name>`: its connected
/// routes, as a cloud's main table always holds the local route).
fn table_of(world: &World, vpc: &str, own: Option<String>) -> String {
    let objects = &world.objects;
    let in_vpc = |t: &str| {
        objects
            .route_tables
            .iter()
            .any(|rt| rt.metadata.name.as_deref() == Some(t) && rt.spec.vpc == vpc)
    };
    let main = objects
        .vpc(vpc)
        .and_then(|v| v.status.as_ref())
        .map(|s| s.main_route_table.clone())
        .filter(|t| !t.is_empty());
    [own, main, Some(vpc.to_owned())]
        .into_iter()
        .flatten()
        .find(|t| in_vpc(t))
        .unwrap_or_else(|| format!("vpc:{vpc}"))
}

/// A connected route to a segment.
fn connected((vni, seg): (u32, GatewaySegment), dst: Ipv4Net) -> RouteSpec {
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

/// A route that drops what it matches, under `kind`'s drop reason.
fn dropping(dst: Ipv4Net, kind: u32) -> RouteSpec {
    RouteSpec {
        dst,
        kind,
        vni: 0,
        gw_ip: Ipv4Addr::UNSPECIFIED,
        gw_mac: [0; 6],
        mtu: 0,
        nh_ip: Ipv4Addr::UNSPECIFIED,
    }
}

fn unsupported(dst: Ipv4Net) -> RouteSpec {
    dropping(dst, ROUTE_UNSUPPORTED)
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
        let nh: Ipv4Addr = e.spec.address.split('/').next()?.parse().ok()?;
        Some(RouteSpec {
            kind: ROUTE_ENDPOINT,
            nh_ip: nh,
            ..connected(segment, dst)
        })
    });
    hop.unwrap_or_else(|| dropping(dst, ROUTE_NO_NEXT_HOP))
}

/// The connected routes of the implicit table of `vpc`: each of its segments' CIDRs.
fn implicit_routes(world: &World, vpc: &str) -> BTreeSet<RouteSpec> {
    let objects = &world.objects;
    let l2 = objects
        .l2networks
        .iter()
        .filter(|l| l.spec.vpc == vpc)
        .filter_map(|l| {
            Some(connected(
                gateway_of(l)?,
                l.spec.cidr.as_deref()?.parse().ok()?,
            ))
        });
    let subnets = objects
        .subnets
        .iter()
        .filter(|s| s.spec.vpc == vpc)
        .filter_map(|s| Some(connected(subnet_segment(s)?, s.spec.cidr.parse().ok()?)));
    l2.chain(subnets).collect()
}

/// One route of a RouteTable, or the line that says why it is left out.
fn table_route(world: &World, rt: &RouteTable, r: &Route) -> Result<RouteSpec, String> {
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
        ("endpoint", None) => return Ok(dropping(dst, ROUTE_NO_NEXT_HOP)),
        // Kinds of later waves (NAT and internet gateways, peering, transit, ...):
        // dropped as ROUTE_UNSUPPORTED, never sent by a shorter route instead.
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
    let ip = e.spec.address.split('/').next().unwrap_or("").parse();
    let mac = crate::parse_mac(&e.spec.mac_address);
    let vtep = e.spec.node_ip.parse();
    match (ip, mac, vtep) {
        (Ok(ip), Some(mac), Ok(vtep)) => Ok(Some(((vni, ip), Neighbour { mac, vtep }))),
        _ => Err(format!(
            "NetworkEndpoint {}/{}: address {:?}, MAC {:?} or Node address {:?} unreadable",
            e.metadata.namespace.as_deref().unwrap_or(""),
            e.metadata.name.as_deref().unwrap_or(""),
            e.spec.address,
            e.spec.mac_address,
            e.spec.node_ip
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
        .filter_map(|e| e.spec.node_ip.parse::<Ipv4Addr>().ok())
        .map(Ipv4Addr::to_bits)
        .collect()
}

/// What every Node's router holds for `world`, and a line for each object it could
/// not use (logged by the caller; nothing half-applied: such a route or neighbour is
/// left out whole).
pub fn desired(world: &World) -> (RouterState, Vec<String>) {
    let objects = &world.objects;
    let mut state = RouterState::default();
    let mut skipped = Vec::new();
    for l in &objects.l2networks {
        if let Some((vni, mut seg)) = gateway_of(l) {
            let own = l.spec.gateway.as_ref().and_then(|g| g.route_table.clone());
            seg.table = table_of(world, &l.spec.vpc, own);
            state.segments.insert(vni, seg);
        }
    }
    for s in &objects.subnets {
        if let Some((vni, mut seg)) = subnet_segment(s) {
            seg.table = table_of(world, &s.spec.vpc, None);
            state.segments.insert(vni, seg);
        }
    }
    // Tables in use, each from its RouteTable, or the implicit one of its Vpc.
    let used: BTreeSet<String> = state.segments.values().map(|s| s.table.clone()).collect();
    for table in used {
        let routes = if let Some(vpc) = table.strip_prefix("vpc:") {
            implicit_routes(world, vpc)
        } else if let Some(rt) = objects
            .route_tables
            .iter()
            .find(|rt| rt.metadata.name.as_deref() == Some(table.as_str()))
        {
            let mut routes = BTreeSet::new();
            for r in &rt.spec.routes {
                match table_route(world, rt, r) {
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
        state.tables.insert(table, routes);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        api::{
            Vpc,
            l2network::{L2Gateway, L2NetworkSpec},
            networkendpoint::NetworkEndpointSpec,
            routetable::{RouteTableSpec, Via},
            subnet::SubnetSpec,
            vpc::{VpcSpec, VpcStatus},
        },
        controller::Config,
    };

    fn net(name: &str, vpc: &str, cidr: &str, gateway: Option<L2Gateway>) -> L2Network {
        L2Network::new(
            name,
            L2NetworkSpec {
                vpc: vpc.into(),
                cidr: Some(cidr.into()),
                gateway,
                ..Default::default()
            },
        )
    }

    fn table(name: &str, vpc: &str, routes: Vec<Route>) -> RouteTable {
        RouteTable::new(
            name,
            RouteTableSpec {
                vpc: vpc.into(),
                routes,
            },
        )
    }

    fn endpoint(name: &str, l2: &str, address: &str, mac: &str, node_ip: &str) -> NetworkEndpoint {
        let mut e = NetworkEndpoint::new(
            name,
            NetworkEndpointSpec {
                kind: "Pod".into(),
                l2_network: Some(l2.into()),
                address: address.into(),
                mac_address: mac.into(),
                node_name: "n".into(),
                node_ip: node_ip.into(),
                ..Default::default()
            },
        );
        e.metadata.namespace = Some("default".into());
        e
    }

    /// The world after the controller's segment and route-table reconcilers.
    fn world(nets: Vec<L2Network>, tables: Vec<RouteTable>, vpcs: Vec<Vpc>) -> World {
        world_with(nets, vec![], tables, vpcs)
    }

    fn world_with(
        nets: Vec<L2Network>,
        subnets: Vec<Subnet>,
        tables: Vec<RouteTable>,
        vpcs: Vec<Vpc>,
    ) -> World {
        let mut w = World::default();
        w.objects.l2networks = nets;
        w.objects.subnets = subnets;
        w.objects.route_tables = tables;
        w.objects.vpcs = vpcs;
        let d = crate::controller::reconcile(&w, &Config::default());
        for l in &mut w.objects.l2networks {
            l.status = d.l2_status.get(name(l)).cloned();
        }
        for s in &mut w.objects.subnets {
            s.status = d
                .subnet_status
                .get(s.metadata.name.as_deref().unwrap())
                .cloned();
        }
        w.objects.route_tables = d.route_tables;
        w
    }

    fn subnet(name: &str, vpc: &str, cidr: &str) -> Subnet {
        Subnet::new(
            name,
            SubnetSpec {
                vpc: vpc.into(),
                cidr: cidr.into(),
                network_acl: None,
            },
        )
    }

    fn vni_of(w: &World, name: &str) -> u32 {
        w.objects
            .l2network(name)
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .vni
    }

    fn gw() -> Option<L2Gateway> {
        Some(L2Gateway::default())
    }

    #[test]
    fn l2_14_connected_routes_of_the_vpc_only_and_later_kinds_refused_whole() {
        let mut tbl = table("a", "a", vec![]);
        tbl.spec.routes.push(Route {
            dst: "0.0.0.0/0".into(),
            via: Via {
                type_: "internetGateway".into(),
                ..Default::default()
            },
        });
        let w = world(
            vec![
                net("web", "a", "10.1.0.0/24", gw()),
                net("db", "a", "10.2.0.0/24", gw()),
                net("pure", "a", "10.3.0.0/24", None),
                net("other", "b", "10.1.0.0/24", gw()),
            ],
            vec![tbl],
            vec![],
        );
        let (state, skipped) = desired(&w);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(state.segments.len(), 3, "pure has no gateway");
        let a = &state.tables["a"];
        let kinds: Vec<(String, u32)> = a.iter().map(|r| (r.dst.to_string(), r.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                ("0.0.0.0/0".into(), ROUTE_UNSUPPORTED),
                ("10.1.0.0/24".into(), ROUTE_CONNECTED),
                ("10.2.0.0/24".into(), ROUTE_CONNECTED),
            ]
        );
        // Vpc b has no RouteTable: its implicit one holds its own segment only, with
        // the same CIDR as a's web but its own VNI (isolation by table).
        let b = &state.tables["vpc:b"];
        assert_eq!(b.len(), 1);
        let web_vni = vni_of(&w, "web");
        assert_ne!(b.first().unwrap().vni, web_vni);
        assert_eq!(state.segments[&b.first().unwrap().vni].table, "vpc:b");
    }

    #[test]
    fn l2_12_a_segment_routes_by_its_own_table_else_the_vpcs_main_one() {
        let mut own = net("own", "a", "10.1.0.0/24", gw());
        own.spec.gateway.as_mut().unwrap().route_table = Some("special".into());
        let mut vpc = Vpc::new("a", VpcSpec::default());
        vpc.status = Some(VpcStatus {
            main_route_table: "main".into(),
        });
        let w = world(
            vec![own, net("plain", "a", "10.2.0.0/24", gw())],
            vec![
                table("special", "a", vec![]),
                table("main", "a", vec![]),
                table("a", "a", vec![]),
            ],
            vec![vpc],
        );
        let (state, _) = desired(&w);
        let table_of = |n: &str| {
            let vni = vni_of(&w, n);
            state.segments[&vni].table.clone()
        };
        assert_eq!(table_of("own"), "special");
        assert_eq!(table_of("plain"), "main");
        // Both tables hold both connected routes (L2-14: every table of the Vpc).
        assert_eq!(state.tables["special"].len(), 2);
        assert_eq!(state.tables["main"].len(), 2);
        assert!(!state.tables.contains_key("a"), "a table no segment uses");
    }

    #[test]
    fn l2_18_neighbours_are_seeded_from_endpoints_of_gateway_segments_by_vni() {
        let mut w = world(
            vec![
                net("web", "a", "10.1.0.0/24", gw()),
                net("twin", "b", "10.1.0.0/24", gw()),
                net("pure", "a", "10.3.0.0/24", None),
            ],
            vec![],
            vec![],
        );
        w.endpoints = vec![
            endpoint(
                "p.eth0",
                "web",
                "10.1.0.2/24",
                "02:00:00:00:00:01",
                "10.99.0.1",
            ),
            endpoint(
                "q.eth0",
                "twin",
                "10.1.0.2/24",
                "02:00:00:00:00:02",
                "10.99.0.2",
            ),
            endpoint(
                "r.eth0",
                "pure",
                "10.3.0.2/24",
                "02:00:00:00:00:03",
                "10.99.0.2",
            ),
            endpoint("s.eth0", "web", "10.1.0.3/24", "not-a-mac", "10.99.0.2"),
        ];
        let (state, skipped) = desired(&w);
        assert_eq!(state.neighbours.len(), 2, "one per gateway segment");
        let vnis: BTreeSet<u32> = state.neighbours.keys().map(|(v, _)| *v).collect();
        assert_eq!(vnis.len(), 2, "the same address in two Vpcs, two VNIs");
        let web = vni_of(&w, "web");
        let n = state.neighbours[&(web, "10.1.0.2".parse().unwrap())];
        assert_eq!(n.mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(n.vtep, Ipv4Addr::new(10, 99, 0, 1));
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("s.eth0"), "{skipped:?}");
    }

    #[test]
    fn l2_15_subnets_are_routed_segments_of_their_vpc() {
        let mut w = world_with(
            vec![net("lab", "a", "10.70.0.0/24", gw())],
            vec![
                subnet("web", "a", "10.71.0.0/24"),
                subnet("twin", "b", "10.71.0.0/24"),
            ],
            vec![table("a", "a", vec![])],
            vec![],
        );
        let web_vni = w
            .objects
            .subnet("web")
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .vni;
        let mut e = endpoint(
            "w.eth0",
            "lab",
            "10.71.0.2/24",
            "02:00:00:00:00:07",
            "10.99.0.2",
        );
        e.spec.l2_network = None;
        e.spec.subnet = Some("web".into());
        w.endpoints = vec![e];
        let (state, skipped) = desired(&w);
        assert!(skipped.is_empty(), "{skipped:?}");
        let web = &state.segments[&web_vni];
        assert_eq!(web.gw_ip, Ipv4Addr::new(10, 71, 0, 1));
        assert_eq!(web.mtu, SUBNET_MTU, "L2-21: the kernel default");
        assert_eq!(web.table, "a", "the Vpc's table");
        // Vpc a's table holds the gateway segment and the Subnet (via the controller's
        // connected routes); Vpc b's implicit table holds its own twin only.
        let a: Vec<(String, u32)> = state.tables["a"]
            .iter()
            .map(|r| (r.dst.to_string(), r.vni))
            .collect();
        assert_eq!(a.len(), 2);
        assert!(a.contains(&("10.71.0.0/24".into(), web_vni)), "{a:?}");
        let b = &state.tables["vpc:b"];
        assert_eq!(b.len(), 1);
        assert_ne!(b.first().unwrap().vni, web_vni, "same CIDR, its own VNI");
        assert_eq!(
            state.neighbours[&(web_vni, Ipv4Addr::new(10, 71, 0, 2))].mac,
            [2, 0, 0, 0, 0, 7],
            "seeded from the Subnet NIC's endpoint"
        );
    }

    #[test]
    fn l2_15_routes_via_an_endpoint_of_the_vpc_and_nothing_else() {
        let via = |dst: &str, endpoint: Option<&str>| Route {
            dst: dst.into(),
            via: Via {
                type_: "endpoint".into(),
                endpoint: endpoint.map(Into::into),
                ..Default::default()
            },
        };
        let mut w = world(
            vec![
                net("lab", "a", "10.80.0.0/24", gw()),
                net("far", "b", "10.90.0.0/24", gw()),
            ],
            vec![table(
                "a",
                "a",
                vec![
                    via("192.168.50.0/24", Some("default/router.eth0")),
                    via("192.168.60.0/24", Some("default/missing.eth0")),
                    via("192.168.70.0/24", Some("default/stranger.eth0")),
                    via("192.168.80.0/24", None),
                ],
            )],
            vec![],
        );
        w.endpoints = vec![
            endpoint(
                "router.eth0",
                "lab",
                "10.80.0.3/24",
                "02:00:00:00:00:03",
                "10.99.0.1",
            ),
            endpoint(
                "stranger.eth0",
                "far",
                "10.90.0.3/24",
                "02:00:00:00:00:04",
                "10.99.0.1",
            ),
        ];
        let (state, skipped) = desired(&w);
        assert!(skipped.is_empty(), "{skipped:?}");
        let lab = vni_of(&w, "lab");
        let route = |dst: &str| {
            state.tables["a"]
                .iter()
                .find(|r| r.dst.to_string() == dst)
                .unwrap()
                .clone()
        };
        let r = route("192.168.50.0/24");
        assert_eq!(
            (r.kind, r.vni, r.nh_ip, r.mtu),
            (ROUTE_ENDPOINT, lab, Ipv4Addr::new(10, 80, 0, 3), 1450),
            "via the router's NIC on lab"
        );
        assert_eq!(r.gw_mac, state.segments[&lab].gw_mac);
        for dst in ["192.168.60.0/24", "192.168.70.0/24", "192.168.80.0/24"] {
            assert_eq!(
                route(dst).kind,
                ROUTE_NO_NEXT_HOP,
                "{dst}: missing, in another Vpc, or unnamed"
            );
        }
    }
}
