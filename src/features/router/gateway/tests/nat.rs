//! The NAT routes (NAT-01, NAT-03): each Node's own address, the cluster's ranges held.
use super::*;

#[test]
fn nat_01_a_route_via_a_nat_gateway_carries_each_nodes_own_address_and_holds_the_cluster_ranges() {
    use juneau_common::gw::{ROUTE_NAT_GW, ROUTE_NO_SERVICES};
    let mut w = nat_world(via_type("natGateway", Some("out")));
    assert_eq!(
        table_a(&w, "node-a"),
        held_ranges(ROUTE_NAT_GW, "10.99.0.101")
    );
    // node-b has no address yet: the route still matches (NAT_NO_ADDRESS), never a
    // shorter one.
    assert_eq!(table_a(&w, "node-b"), held_ranges(ROUTE_NAT_GW, "0.0.0.0"));
    // A tenant whose own segment holds the Nodes' addresses keeps them: its route
    // wins, no unreachable /32 inside it.
    let mut own = w.clone();
    own.objects.route_tables[0].spec.routes.push(Route {
        dst: "192.168.0.0/24".into(),
        via: Via {
            type_: "endpoint".into(),
            endpoint: Some("default/router.eth0".into()),
            ..Default::default()
        },
    });
    let (state, _) = desired(&own, "node-a");
    assert!(
        state.tables["a"]
            .iter()
            .all(|r| !r.dst.to_string().starts_with("192.168.0.1/32")
                && !r.dst.to_string().starts_with("192.168.0.2/32")),
        "{:?}",
        state.tables["a"]
    );
    // A table without a NAT route holds nothing more than its segments and the
    // Services its Vpc does not consume.
    w.objects.route_tables[0]
        .spec
        .routes
        .retain(|r| r.via.type_ != "natGateway");
    let (state, _) = desired(&w, "node-a");
    let kinds: Vec<(String, u32)> = state.tables["a"]
        .iter()
        .map(|r| (r.dst.to_string(), r.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("10.1.0.0/24".into(), ROUTE_CONNECTED),
            ("10.96.0.0/12".into(), ROUTE_NO_SERVICES),
        ]
    );
    // A Vpc that consumes Services has no such route: its Service stage translates.
    w.objects.vpcs.push(crate::api::Vpc::new(
        "a",
        crate::api::vpc::VpcSpec {
            service: Some(crate::api::vpc::VpcService {
                consume: true,
                provider: None,
            }),
            ..Default::default()
        },
    ));
    let (state, _) = desired(&w, "node-a");
    assert!(state.tables["a"].iter().all(|r| r.kind == ROUTE_CONNECTED));
}

#[test]
fn nat_03_an_internet_gateway_route_carries_the_vpcs_nat_gateway_address_or_none() {
    use crate::api::{NATGateway, natgateway::NATGatewaySpec};
    use juneau_common::gw::ROUTE_INTERNET_GW;
    let mut w = nat_world(via_type("internetGateway", None));
    // A NIC without an ElasticIP attached falls back to the Vpc's NATGateway: this
    // Node's address on it, the cluster's own ranges held as for a NATGateway route.
    assert_eq!(
        table_a(&w, "node-a"),
        held_ranges(ROUTE_INTERNET_GW, "10.99.0.101")
    );
    // No address on this Node: the route still matches, refused by name
    // (IGW_NO_PUBLIC_ADDRESS), never a shorter one.
    assert_eq!(
        table_a(&w, "node-b"),
        held_ranges(ROUTE_INTERNET_GW, "0.0.0.0")
    );
    // Of several gateways of the Vpc, the first by name with an address here; one of
    // another Vpc is never taken.
    let gateway = |name: &str, vpc: &str, en: &str| {
        NATGateway::new(
            name,
            NATGatewaySpec {
                vpc: vpc.into(),
                external_network: en.into(),
            },
        )
    };
    w.objects
        .nat_gateways
        .push(gateway("aaa-unaddressed", "a", "nowhere"));
    w.objects
        .nat_gateways
        .push(gateway("aab-other", "b", "ext"));
    assert_eq!(table_a(&w, "node-a")[0].2, "10.99.0.101");
    w.objects.nat_gateways.retain(|g| g.spec.vpc != "a");
    assert_eq!(
        table_a(&w, "node-a")[0],
        (
            "0.0.0.0/0".to_owned(),
            ROUTE_INTERNET_GW,
            "0.0.0.0".to_owned()
        ),
        "a Vpc without a NATGateway of its own has no fallback"
    );
}
