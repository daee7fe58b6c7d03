//! The router's desired maps computed from small clusters: connected and table routes,
//! neighbours from endpoints, Subnets as routed segments.
use super::*;
use juneau_common::gw::{ROUTE_CONNECTED, ROUTE_ENDPOINT, ROUTE_NO_NEXT_HOP, ROUTE_UNSUPPORTED};

use crate::{
    api::{
        RouteTable, Vpc,
        l2network::{L2Gateway, L2NetworkSpec},
        networkendpoint::NetworkEndpointSpec,
        routetable::{Route, RouteTableSpec, Via},
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
            address: address.parse().ok(),
            mac_address: mac.parse().ok(),
            node_name: "n".into(),
            node_ip: node_ip.parse().ok(),
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
    let cfg = Config {
        default_subnet_cidr: None,
        ..Config::default()
    };
    let d = crate::controller::reconcile(&w, &cfg);
    let writes = crate::cluster::plan(&w, &d);
    crate::cluster::apply_to(&mut w, &writes, &|_, _| Ok(()));
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
            type_: "vpcPeering".into(),
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
    let (state, skipped) = desired(&w, "node-a");
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
    let (state, _) = desired(&w, "node-a");
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
    let (state, skipped) = desired(&w, "node-a");
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
    let (state, skipped) = desired(&w, "node-a");
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
    let (state, skipped) = desired(&w, "node-a");
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

/// Vpc a (Subnet web, 10.1.0.0/24) whose table routes 0.0.0.0/0 as `out` says, its
/// NATGateway `out` on ExternalNetwork ext, where node-a has 10.99.0.101 and node-b no
/// address yet; Services 10.96.0.0/12, the default Vpc's Pods 10.16.0.0/16.
fn nat_world(out: Route) -> World {
    use crate::api::{
        ExternalNetworkAttachment, NATGateway, NodeRecord,
        externalnetworkattachment::{
            ExternalNetworkAttachmentSpec, ExternalNetworkAttachmentStatus,
        },
        natgateway::NATGatewaySpec,
    };
    let mut w = world(
        vec![net("web", "a", "10.1.0.0/24", gw())],
        vec![table("a", "a", vec![out])],
        vec![],
    );
    w.objects.nat_gateways.push(NATGateway::new(
        "out",
        NATGatewaySpec {
            vpc: "a".into(),
            external_network: "ext".into(),
        },
    ));
    w.objects.service_cidrs = vec!["10.96.0.0/12".parse().unwrap()];
    w.nodes = ["node-a", "node-b"]
        .iter()
        .enumerate()
        .map(|(i, n)| NodeRecord {
            name: (*n).into(),
            internal_ip: format!("192.168.0.{}", i + 1),
            terminating: false,
        })
        .collect();
    w.objects
        .subnets
        .push(subnet("default", "default", "10.16.0.0/16"));
    let mut ena = ExternalNetworkAttachment::new(
        "ext--node-a",
        ExternalNetworkAttachmentSpec {
            external_network: "ext".into(),
            node_name: "node-a".into(),
        },
    );
    ena.status = Some(ExternalNetworkAttachmentStatus {
        assigned_ip: "10.99.0.101".parse().ok(),
        conditions: vec![],
    });
    w.objects.external_network_attachments.push(ena);
    w
}

/// Table a's routes on `node`: (destination, kind, next hop).
fn table_a(w: &World, node: &str) -> Vec<(String, u32, String)> {
    let (state, skipped) = desired(w, node);
    assert!(skipped.is_empty(), "{skipped:?}");
    state.tables["a"]
        .iter()
        .map(|r| (r.dst.to_string(), r.kind, r.nh_ip.to_string()))
        .collect()
}

/// Table a as `nat_world` makes it, with `kind` for 0.0.0.0/0 via `node_a`.
fn held_ranges(kind: u32, node_a: &str) -> Vec<(String, u32, String)> {
    use juneau_common::gw::{ROUTE_NO_SERVICES, ROUTE_UNREACHABLE};
    vec![
        ("0.0.0.0/0".to_owned(), kind, node_a.to_owned()),
        ("10.1.0.0/24".into(), ROUTE_CONNECTED, "0.0.0.0".into()),
        // The cluster's own: the Pod network, the Services (refused by name: this
        // Vpc does not consume them), the Nodes.
        ("10.16.0.0/16".into(), ROUTE_UNREACHABLE, "0.0.0.0".into()),
        ("10.96.0.0/12".into(), ROUTE_NO_SERVICES, "0.0.0.0".into()),
        ("192.168.0.1/32".into(), ROUTE_UNREACHABLE, "0.0.0.0".into()),
        ("192.168.0.2/32".into(), ROUTE_UNREACHABLE, "0.0.0.0".into()),
    ]
}

fn via_type(ty: &str, nat_gateway: Option<&str>) -> Route {
    Route {
        dst: "0.0.0.0/0".into(),
        via: Via {
            type_: ty.into(),
            nat_gateway: nat_gateway.map(Into::into),
            ..Default::default()
        },
    }
}

mod nat;
