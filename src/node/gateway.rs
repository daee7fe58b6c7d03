//! The Vpc router every Node runs: what its maps should hold, computed from the
//! cluster alone (pure; [`crate::node::dataplane`] writes it). Every Node holds every
//! gateway segment, RouteTable and neighbour of the cluster, because any of its
//! workloads may route to any segment of its Vpc, whether or not the Node has a port
//! there.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use ipnet::Ipv4Net;
use juneau_common::gw::{ROUTE_CONNECTED, ROUTE_UNSUPPORTED};

use crate::{api::L2Network, store::World};

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
    /// For connected routes: the segment's VNI, gateway address, MAC and MTU.
    pub vni: u32,
    pub gw_ip: Ipv4Addr,
    pub gw_mac: [u8; 6],
    pub mtu: u32,
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

fn name(l: &L2Network) -> &str {
    l.metadata.name.as_deref().unwrap_or("")
}

/// A segment the router serves: a gateway, a VNI and a well-formed status.
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

/// The table a gateway segment routes by: its own `gateway.routeTable`, else its Vpc's
/// main table (`status.mainRouteTable`, else the RouteTable named as the Vpc), else
/// the Vpc's implicit table (`vpc:<name>`: its connected routes, as a cloud's main
/// table always holds the local route).
fn table_of(world: &World, l: &L2Network) -> String {
    let objects = &world.objects;
    let vpc = &l.spec.vpc;
    let in_vpc = |t: &str| {
        objects
            .route_tables
            .iter()
            .any(|rt| rt.metadata.name.as_deref() == Some(t) && &rt.spec.vpc == vpc)
    };
    let own = l.spec.gateway.as_ref().and_then(|g| g.route_table.clone());
    let main = objects
        .vpc(vpc)
        .and_then(|v| v.status.as_ref())
        .map(|s| s.main_route_table.clone())
        .filter(|t| !t.is_empty());
    [own, main, Some(vpc.clone())]
        .into_iter()
        .flatten()
        .find(|t| in_vpc(t))
        .unwrap_or_else(|| format!("vpc:{vpc}"))
}

/// A connected route to the gateway segment `l` (`None` when it serves none).
fn connected(l: &L2Network, dst: Ipv4Net) -> Option<RouteSpec> {
    let (vni, seg) = gateway_of(l)?;
    Some(RouteSpec {
        dst,
        kind: ROUTE_CONNECTED,
        vni,
        gw_ip: seg.gw_ip,
        gw_mac: seg.gw_mac,
        mtu: seg.mtu,
    })
}

fn unsupported(dst: Ipv4Net) -> RouteSpec {
    RouteSpec {
        dst,
        kind: ROUTE_UNSUPPORTED,
        vni: 0,
        gw_ip: Ipv4Addr::UNSPECIFIED,
        gw_mac: [0; 6],
        mtu: 0,
    }
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
            seg.table = table_of(world, l);
            state.segments.insert(vni, seg);
        }
    }
    // Tables in use, each from its RouteTable, or the implicit one of its Vpc.
    let used: BTreeSet<String> = state.segments.values().map(|s| s.table.clone()).collect();
    for table in used {
        let mut routes = BTreeSet::new();
        if let Some(vpc) = table.strip_prefix("vpc:") {
            for l in objects.l2networks.iter().filter(|l| l.spec.vpc == vpc) {
                let dst = l.spec.cidr.as_deref().and_then(|c| c.parse().ok());
                if let Some(r) = dst.and_then(|d| connected(l, d)) {
                    routes.insert(r);
                }
            }
        } else if let Some(rt) = objects
            .route_tables
            .iter()
            .find(|rt| rt.metadata.name.as_deref() == Some(table.as_str()))
        {
            for r in &rt.spec.routes {
                let Ok(dst) = r.dst.parse::<Ipv4Net>() else {
                    skipped.push(format!(
                        "RouteTable {table}: route dst {:?} is not an IPv4 prefix",
                        r.dst
                    ));
                    continue;
                };
                let dst = dst.trunc();
                let target = r
                    .via
                    .l2_network
                    .as_deref()
                    .and_then(|n| objects.l2network(n).filter(|l| l.spec.vpc == rt.spec.vpc));
                match (r.via.type_.as_str(), target) {
                    ("connected", Some(l)) => match connected(l, dst) {
                        Some(route) => {
                            routes.insert(route);
                        }
                        None => skipped.push(format!(
                            "RouteTable {table}: route to {dst} names L2Network {} which has no gateway yet",
                            name(l)
                        )),
                    },
                    _ => {
                        // Kinds of later waves (subnets, NAT and internet gateways,
                        // peering, transit): dropped as ROUTE_UNSUPPORTED, never sent
                        // by a shorter route instead.
                        routes.insert(unsupported(dst));
                    }
                }
            }
        }
        state.tables.insert(table, routes);
    }
    for e in &world.endpoints {
        let Some(l) = e
            .spec
            .l2_network
            .as_deref()
            .and_then(|n| objects.l2network(n))
        else {
            continue;
        };
        let Some((vni, _)) = gateway_of(l) else {
            continue;
        };
        let ip = e.spec.address.split('/').next().unwrap_or("").parse();
        let mac = crate::parse_mac(&e.spec.mac_address);
        let vtep = e.spec.node_ip.parse();
        match (ip, mac, vtep) {
            (Ok(ip), Some(mac), Ok(vtep)) => {
                state.neighbours.insert((vni, ip), Neighbour { mac, vtep });
            }
            _ => skipped.push(format!(
                "NetworkEndpoint {}/{}: address {:?}, MAC {:?} or Node address {:?} unreadable",
                e.metadata.namespace.as_deref().unwrap_or(""),
                e.metadata.name.as_deref().unwrap_or(""),
                e.spec.address,
                e.spec.mac_address,
                e.spec.node_ip
            )),
        }
    }
    (state, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        api::{
            NetworkEndpoint, RouteTable, Vpc,
            l2network::{L2Gateway, L2NetworkSpec},
            networkendpoint::NetworkEndpointSpec,
            routetable::{Route, RouteTableSpec, Via},
            vpc::{VpcSpec, VpcStatus},
        },
        controller::{Config, l2network, routetable},
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
        let mut w = World::default();
        w.objects.l2networks = nets;
        w.objects.route_tables = tables;
        w.objects.vpcs = vpcs;
        let st = l2network::reconcile_all(&w.objects, &Config::default());
        for l in &mut w.objects.l2networks {
            l.status = st.get(name(l)).cloned();
        }
        w.objects.route_tables = routetable::reconcile_all(&w.objects);
        w
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
}
