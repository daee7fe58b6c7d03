use super::*;
use crate::api::routetable::Route;
use crate::api::{
    ExternalNetwork, RouteTable, Vpc,
    externalnetwork::ExternalNetworkSpec,
    natgateway::NATGatewaySpec,
    routetable::{RouteTableSpec, Via},
    vpc::VpcSpec,
};
use crate::features::router::admission_routetable::nat_route;

fn gateway(name: &str, vpc: &str, en: &str) -> NATGateway {
    NATGateway::new(
        name,
        NATGatewaySpec {
            vpc: vpc.into(),
            external_network: en.into(),
        },
    )
}

fn snap() -> Snapshot {
    Snapshot {
        vpcs: vec![
            Vpc::new("a", VpcSpec::default()),
            Vpc::new("b", VpcSpec::default()),
        ],
        external_networks: vec![ExternalNetwork::new(
            "ext",
            ExternalNetworkSpec {
                type_: "arp".into(),
                address_pools: vec!["lan".into()],
            },
        )],
        nat_gateways: vec![gateway("out-a", "a", "ext"), gateway("out-b", "b", "ext")],
        ..Default::default()
    }
}

fn msg(v: Verdict) -> String {
    v.unwrap_err().to_string()
}

fn nat(name: Option<&str>) -> Route {
    Route {
        dst: "0.0.0.0/0".into(),
        via: Via {
            type_: "natGateway".into(),
            nat_gateway: name.map(Into::into),
            ..Default::default()
        },
    }
}

#[test]
fn nat_01_a_nat_gateway_names_an_existing_vpc_and_an_external_network_both_immutable() {
    let s = snap();
    assert!(validate_nat_gateway_create(&gateway("g", "a", "later"), &s).is_ok());
    // The default Vpc is the controller's to make: its gateway may come first.
    assert!(validate_nat_gateway_create(&gateway("default", "default", "ext"), &s).is_ok());
    // The name `default` is the default Vpc's gateway's.
    assert!(
        msg(validate_nat_gateway_create(
            &gateway("default", "a", "ext"),
            &s
        ))
        .starts_with("metadata.name: the NATGateway named \"default\"")
    );
    assert_eq!(
        msg(validate_nat_gateway_create(&gateway("g", "c", "ext"), &s)),
        "spec.vpc: Vpc \"c\" does not exist; create it first"
    );
    assert!(
        msg(validate_nat_gateway_create(&gateway("g", "", "ext"), &s))
            .starts_with("spec.vpc: required")
    );
    assert!(
        msg(validate_nat_gateway_create(&gateway("g", "a", ""), &s))
            .starts_with("spec.externalNetwork: required")
    );
    let old = gateway("g", "a", "ext");
    assert!(
        msg(validate_nat_gateway_update(
            &old,
            &gateway("g", "b", "ext"),
            &s
        ))
        .starts_with("spec.vpc: is immutable")
    );
    assert!(
        msg(validate_nat_gateway_update(
            &old,
            &gateway("g", "a", "other"),
            &s
        ))
        .starts_with("spec.externalNetwork: is immutable")
    );
}

#[test]
fn nat_01_a_nat_route_names_a_nat_gateway_of_its_own_vpc() {
    let s = snap();
    assert!(nat_route(0, &nat(Some("out-a")), "a", &s).is_ok());
    assert_eq!(
        msg(nat_route(2, &nat(None), "a", &s)),
        "spec.routes[2].via.natGateway: type natGateway needs the NATGateway's name (natGateway: <name>)"
    );
    assert_eq!(
        msg(nat_route(0, &nat(Some("gone")), "a", &s)),
        "spec.routes[0].via.natGateway: NATGateway \"gone\" does not exist; create it first"
    );
    assert_eq!(
        msg(nat_route(0, &nat(Some("out-b")), "a", &s)),
        "spec.routes[0].via.natGateway: NATGateway \"out-b\" belongs to Vpc \"b\", not to this table's Vpc \"a\"; route to a NATGateway of \"a\""
    );
}

#[test]
fn nat_01_a_routed_nat_gateway_and_a_used_external_network_are_not_deleted() {
    let mut s = snap();
    assert!(validate_delete_nat_gateway("out-a", &s).is_ok());
    s.route_tables.push(RouteTable::new(
        "a",
        RouteTableSpec {
            vpc: "a".into(),
            routes: vec![nat(Some("out-a"))],
        },
    ));
    assert_eq!(
        msg(validate_delete_nat_gateway("out-a", &s)),
        "metadata.name: NATGateway \"out-a\" is routed to by RouteTables \"a\": remove those routes first"
    );
    assert!(validate_delete_nat_gateway("out-b", &s).is_ok());
    assert_eq!(
        msg(validate_delete_external_network("ext", &s)),
        "metadata.name: ExternalNetwork \"ext\" gives the Nodes' addresses of NATGateways \"out-a\", \"out-b\": delete them first"
    );
    assert!(validate_delete_external_network("other", &s).is_ok());
    // The default gateway's own route (the controller's) does not hold it.
    s.nat_gateways.push(gateway("default", "default", "ext"));
    s.route_tables.push(RouteTable::new(
        "default",
        RouteTableSpec {
            vpc: "default".into(),
            routes: vec![crate::api::routetable::Route::default_nat()],
        },
    ));
    assert!(validate_delete_nat_gateway("default", &s).is_ok());
}
