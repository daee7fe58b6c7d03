//! The NATGateway reconciler over whole controller passes on the embedded store (the
//! standalone mode's), as a cluster's objects go through admission and back.
use crate::{
    api::{
        AddressPool, ElasticIP, ExternalNetwork, NATGateway, NodeRecord, Object, RouteTable, Vpc,
        addresspool::AddressPoolSpec, elasticip::ElasticIPSpec,
        externalnetwork::ExternalNetworkSpec, natgateway::NATGatewaySpec, net::shown,
        routetable::RouteTableSpec, vpc::VpcSpec,
    },
    cluster::World,
    controller::{Config, run_once},
    store::Store,
};

fn settle(store: &Store) -> World {
    for _ in 0..8 {
        if !run_once(store, &Config::default()).expect("the embedded store answers") {
            return store.read().0;
        }
    }
    panic!("no fixed point in 8 passes");
}

fn node(name: &str) -> NodeRecord {
    NodeRecord {
        name: name.into(),
        internal_ip: String::new(),
        terminating: false,
    }
}

/// An arp ExternalNetwork `ext` over `range`, a Vpc `tenant`, a NATGateway `out` of it,
/// an ElasticIP `held` asking for the range's first address, and Nodes `nodes`.
fn cluster(range: &str, nodes: &[&str]) -> Store {
    let store = Store::new();
    let create = |o: Object| store.create(o).expect("admitted");
    create(Object::AddressPool(AddressPool::new(
        "lan",
        AddressPoolSpec {
            advertise_mode: "arp".into(),
            addresses: vec![range.into()],
        },
    )));
    create(Object::ExternalNetwork(ExternalNetwork::new(
        "ext",
        ExternalNetworkSpec {
            type_: "arp".into(),
            address_pools: vec!["lan".into()],
        },
    )));
    create(Object::Vpc(Vpc::new("tenant", VpcSpec::default())));
    create(Object::NATGateway(NATGateway::new(
        "out",
        NATGatewaySpec {
            vpc: "tenant".into(),
            external_network: "ext".into(),
        },
    )));
    let mut eip = ElasticIP::new(
        "held",
        ElasticIPSpec {
            external_network: "ext".into(),
            requested_ip: Some(range.split('-').next().unwrap().into()),
        },
    );
    eip.metadata.namespace = Some("default".into());
    create(Object::ElasticIP(eip));
    for n in nodes {
        store.put_node(node(n));
    }
    store
}

/// (attachment, address, Ready, its reason) of every attachment, by name.
fn attachments(w: &World) -> Vec<(String, String, String, String)> {
    let mut out: Vec<_> = w
        .objects
        .external_network_attachments
        .iter()
        .map(|a| {
            let st = a.status.clone().unwrap_or_default();
            let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
            (
                a.metadata.name.clone().unwrap(),
                shown(&st.assigned_ip),
                ready.status.clone(),
                ready.reason.clone(),
            )
        })
        .collect();
    out.sort();
    out
}

fn row(name: &str, ip: &str, ready: &str, reason: &str) -> (String, String, String, String) {
    (name.into(), ip.into(), ready.into(), reason.into())
}

#[test]
fn nat_02_each_node_gets_one_address_of_the_pools_never_an_elastic_ips_and_announced_by_it_alone() {
    let store = cluster("10.99.0.100-10.99.0.110", &["node-b", "node-a"]);
    let w = settle(&store);
    assert_eq!(
        attachments(&w),
        vec![
            // .100 is the ElasticIP's: one allocator, so no attachment takes it.
            row("ext--node-a", "10.99.0.101", "True", "Assigned"),
            row("ext--node-b", "10.99.0.102", "True", "Assigned"),
        ]
    );
    let eip = &w.objects.elastic_ips[0];
    assert_eq!(shown(&eip.status.as_ref().unwrap().address), "10.99.0.100");
    // One ARPAdvertisement per attachment, answered by its own Node only.
    let mut adverts: Vec<(String, String, String)> = w
        .objects
        .arp_advertisements
        .iter()
        .filter(|a| a.metadata.name.as_deref().unwrap().starts_with("ena-"))
        .map(|a| {
            (
                a.metadata.name.clone().unwrap(),
                shown(&a.spec.address),
                a.spec.node_name.clone(),
            )
        })
        .collect();
    adverts.sort();
    assert_eq!(
        adverts,
        vec![
            (
                "ena-ext--node-a".into(),
                "10.99.0.101".into(),
                "node-a".into()
            ),
            (
                "ena-ext--node-b".into(),
                "10.99.0.102".into(),
                "node-b".into()
            ),
        ]
    );
    let g = w
        .objects
        .nat_gateway("out")
        .unwrap()
        .status
        .clone()
        .unwrap();
    assert_eq!((g.ready_nodes, g.nodes), (2, 2));
    assert_eq!(g.conditions[0].status, "True");
    // A new ElasticIP never takes an attachment's address: the next free one.
    let mut late = ElasticIP::new(
        "late",
        ElasticIPSpec {
            external_network: "ext".into(),
            requested_ip: None,
        },
    );
    late.metadata.namespace = Some("default".into());
    store.create(Object::ElasticIP(late)).unwrap();
    let w = settle(&store);
    let late = w
        .objects
        .elastic_ip("default", "late")
        .and_then(|e| e.status.clone())
        .unwrap();
    assert_eq!(shown(&late.address), "10.99.0.103");
}

#[test]
fn nat_02_a_node_that_leaves_gives_its_address_back_and_one_that_joins_gets_one_others_keep_theirs()
{
    let store = cluster("10.99.0.100-10.99.0.110", &["node-a", "node-b"]);
    settle(&store);
    store.delete_node("node-a");
    let w = settle(&store);
    assert_eq!(
        attachments(&w),
        vec![row("ext--node-b", "10.99.0.102", "True", "Assigned")],
        "node-b keeps its address; node-a's attachment goes"
    );
    assert!(
        !w.objects
            .arp_advertisements
            .iter()
            .any(|a| a.spec.node_name == "node-a"),
        "nobody answers for the address of a Node that left"
    );
    store.put_node(node("node-c"));
    let w = settle(&store);
    assert_eq!(
        attachments(&w),
        vec![
            row("ext--node-b", "10.99.0.102", "True", "Assigned"),
            row("ext--node-c", "10.99.0.101", "True", "Assigned"),
        ],
        "the address node-a gave back is the first free one"
    );
}

#[test]
fn nat_02_a_pool_too_small_for_the_nodes_leaves_the_last_waiting_with_a_reason_and_the_others_working()
 {
    // Three addresses: the ElasticIP's and two Nodes'.
    let store = cluster("10.99.0.100-10.99.0.102", &["node-a", "node-b", "node-c"]);
    let w = settle(&store);
    assert_eq!(
        attachments(&w),
        vec![
            row("ext--node-a", "10.99.0.101", "True", "Assigned"),
            row("ext--node-b", "10.99.0.102", "True", "Assigned"),
            row("ext--node-c", "", "False", "NoAddressAvailable"),
        ]
    );
    let waiting = w
        .objects
        .external_network_attachment("ext--node-c")
        .unwrap();
    let message = &waiting.status.as_ref().unwrap().conditions[0].message;
    assert!(
        message.contains("lan") && message.contains("add addresses"),
        "names the pools and the fix: {message}"
    );
    let g = w
        .objects
        .nat_gateway("out")
        .unwrap()
        .status
        .clone()
        .unwrap();
    assert_eq!((g.ready_nodes, g.nodes), (2, 3));
    assert_eq!(
        (
            g.conditions[0].status.as_str(),
            g.conditions[0].reason.as_str()
        ),
        ("True", "PartiallyAssigned")
    );
    assert!(g.conditions[0].message.contains("node-c"));
}

#[test]
fn nat_01_a_nat_gateway_waits_for_its_external_network_and_says_so() {
    let store = Store::new();
    store
        .create(Object::Vpc(Vpc::new("tenant", VpcSpec::default())))
        .unwrap();
    store
        .create(Object::NATGateway(NATGateway::new(
            "out",
            NATGatewaySpec {
                vpc: "tenant".into(),
                external_network: "nowhere".into(),
            },
        )))
        .unwrap();
    store.put_node(node("node-a"));
    let w = settle(&store);
    let c = &w
        .objects
        .nat_gateway("out")
        .unwrap()
        .status
        .clone()
        .unwrap()
        .conditions[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "MissingDependency")
    );
    assert!(c.message.contains("\"nowhere\"") && c.message.contains("create it"));
    assert!(w.objects.external_network_attachments.is_empty());
}

#[test]
fn nat_01_the_default_nat_gateway_gives_the_default_vpcs_main_table_a_default_route_once_ready() {
    let store = cluster("10.99.0.100-10.99.0.110", &[]);
    settle(&store); // the default Vpc
    store
        .create(Object::RouteTable(RouteTable::new(
            "default",
            RouteTableSpec {
                vpc: "default".into(),
                routes: vec![],
            },
        )))
        .unwrap();
    store
        .create(Object::NATGateway(NATGateway::new(
            "default",
            NATGatewaySpec {
                vpc: "default".into(),
                external_network: "ext".into(),
            },
        )))
        .unwrap();
    let nat_routes = |w: &World| {
        w.objects
            .route_table("default")
            .unwrap()
            .spec
            .routes
            .iter()
            .filter(|r| r.via.type_ == "natGateway")
            .map(|r| (r.dst.clone(), r.via.nat_gateway.clone()))
            .collect::<Vec<_>>()
    };
    // No Node yet: not Ready, no route.
    let w = settle(&store);
    assert_eq!(nat_routes(&w), vec![]);
    store.put_node(node("node-a"));
    let w = settle(&store);
    assert_eq!(
        nat_routes(&w),
        vec![("0.0.0.0/0".to_owned(), Some("default".to_owned()))]
    );
    // The tenant's gateway gives no table anything.
    assert!(
        w.objects
            .route_tables
            .iter()
            .filter(|t| t.spec.vpc != "default")
            .all(|t| t.spec.routes.iter().all(|r| r.via.type_ != "natGateway"))
    );
    // Not Ready any more (its Node left): the route goes.
    store.delete_node("node-a");
    let w = settle(&store);
    assert_eq!(nat_routes(&w), vec![]);
}

#[test]
fn nat_02_an_elastic_ip_asking_for_a_nodes_address_gets_it_refused_and_the_node_keeps_it() {
    let store = cluster("10.99.0.100-10.99.0.110", &["node-a"]);
    let w = settle(&store);
    assert_eq!(
        attachments(&w),
        vec![row("ext--node-a", "10.99.0.101", "True", "Assigned")]
    );
    let mut late = ElasticIP::new(
        "wants-101",
        ElasticIPSpec {
            external_network: "ext".into(),
            requested_ip: Some("10.99.0.101".into()),
        },
    );
    late.metadata.namespace = Some("default".into());
    store.create(Object::ElasticIP(late)).unwrap();
    let w = settle(&store);
    assert_eq!(
        attachments(&w),
        vec![row("ext--node-a", "10.99.0.101", "True", "Assigned")],
        "the Node keeps its address"
    );
    let st = w
        .objects
        .elastic_ip("default", "wants-101")
        .and_then(|e| e.status.clone())
        .unwrap();
    assert!(st.address.is_none(), "{st:?}");
    assert!(
        st.conditions.iter().any(|c| c.reason == "RequestedIPInUse"),
        "{st:?}"
    );
}

#[test]
fn nat_02_a_nodes_ports_exhausted_condition_stays_beside_ready_through_controller_passes() {
    use crate::{api::condition::Condition, cluster::Cluster};
    let store = cluster("10.99.0.100-10.99.0.103", &["node-a", "node-b"]);
    settle(&store);
    let exhausted = Condition::new(
        crate::api::PORTS_EXHAUSTED,
        true,
        "NoFreePort",
        "3 new connections found no free source port",
    );
    assert!(
        store
            .set_attachment_condition("ext--node-a", exhausted.clone())
            .unwrap()
    );
    assert!(
        !store
            .set_attachment_condition("ext--node-a", exhausted.clone())
            .unwrap(),
        "the same condition again changes nothing"
    );
    assert!(
        !store
            .set_attachment_condition("ext--gone", exhausted.clone())
            .unwrap(),
        "an attachment that is not there is left alone"
    );
    // A Node joins: a controller pass rewrites every attachment's status.
    store.put_node(node("node-c"));
    let w = settle(&store);
    let of = |name: &str| {
        w.objects
            .external_network_attachment(name)
            .and_then(|a| a.status.clone())
            .map(|s| s.conditions)
            .unwrap_or_default()
    };
    let a = of("ext--node-a");
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(a[0].type_, "Ready");
    assert_eq!(a[1], exhausted, "the Node's condition carried over");
    assert_eq!(of("ext--node-b").len(), 1, "no other attachment gets it");
}

/// NAT-02 on a bgp network: each Node's address is a /32 BGPAdvertisement of the pool
/// that holds it, pinned to that Node (`ena-<attachment>`, the controller's own), and
/// goes with the attachment; a user's BGPAdvertisement is never touched.
#[test]
fn nat_02_a_bgp_network_gives_each_node_a_pinned_slash_32() {
    use crate::api::{BGPAdvertisement, bgpadvertisement::BGPAdvertisementSpec};
    let store = Store::new();
    let create = |o: Object| store.create(o).expect("admitted");
    create(Object::AddressPool(AddressPool::new(
        "wan",
        AddressPoolSpec {
            advertise_mode: "bgp".into(),
            addresses: vec!["192.0.2.0/28".into()],
        },
    )));
    create(Object::ExternalNetwork(ExternalNetwork::new(
        "ext",
        ExternalNetworkSpec {
            type_: "bgp".into(),
            address_pools: vec!["wan".into()],
        },
    )));
    create(Object::BGPAdvertisement(BGPAdvertisement::new(
        "users",
        BGPAdvertisementSpec {
            address_pools: vec!["wan".into()],
            ..Default::default()
        },
    )));
    create(Object::Vpc(Vpc::new("tenant", VpcSpec::default())));
    create(Object::NATGateway(NATGateway::new(
        "out",
        NATGatewaySpec {
            vpc: "tenant".into(),
            external_network: "ext".into(),
        },
    )));
    for n in ["node-a", "node-b"] {
        store.put_node(node(n));
    }
    let w = settle(&store);
    assert_eq!(
        attachments(&w),
        [
            row("ext--node-a", "192.0.2.1", "True", "Assigned"),
            row("ext--node-b", "192.0.2.2", "True", "Assigned"),
        ]
    );
    // (name, nodeName, prefix, addressPools) of every BGPAdvertisement.
    type Ena = (String, Option<String>, Option<String>, Vec<String>);
    let ena = |w: &World| -> Vec<Ena> {
        let mut v: Vec<_> = w
            .objects
            .bgp_advertisements
            .iter()
            .map(|a| {
                (
                    a.metadata.name.clone().unwrap(),
                    a.spec.node_name.clone(),
                    a.spec.prefix.clone(),
                    a.spec.address_pools.clone(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let pinned = |n: &str, node: &str, p: &str| {
        (
            n.to_owned(),
            Some(node.to_owned()),
            Some(p.to_owned()),
            vec!["wan".to_owned()],
        )
    };
    assert_eq!(
        ena(&w),
        [
            pinned("ena-ext--node-a", "node-a", "192.0.2.1/32"),
            pinned("ena-ext--node-b", "node-b", "192.0.2.2/32"),
            ("users".into(), None, None, vec!["wan".into()]),
        ]
    );
    // A Node that leaves takes its /32 along; the user's stays.
    store.delete_node("node-b");
    let w = settle(&store);
    assert_eq!(
        ena(&w),
        [
            pinned("ena-ext--node-a", "node-a", "192.0.2.1/32"),
            ("users".into(), None, None, vec!["wan".into()]),
        ]
    );
}
