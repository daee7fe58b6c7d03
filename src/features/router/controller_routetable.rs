//! L2-14: every Subnet, and every L2Network with a gateway, puts a connected route for
//! its CIDR into every RouteTable of its Vpc. NAT-01: the NATGateway `default`, once
//! Ready, gives the default Vpc's main RouteTable (named as the Vpc) `0.0.0.0/0 via
//! natGateway default`, unless the table routes `0.0.0.0/0` otherwise already (the
//! user's route wins); the route goes again when the gateway is not Ready. Where the
//! default Vpc has no RouteTable, the Nodes' routers add the same route to its
//! implicit table (`node::gateway`).
use crate::{
    admission::Snapshot,
    api::{
        DEFAULT_VPC, RouteTable,
        routetable::{Route, Via},
    },
};

/// `default_nat`: the NATGateway `default` is Ready in this pass.
pub fn reconcile_all(snap: &Snapshot, default_nat: bool) -> Vec<RouteTable> {
    snap.route_tables
        .iter()
        .map(|rt| {
            let mut rt = rt.clone();
            if rt.metadata.name.as_deref() == Some(DEFAULT_VPC) && rt.spec.vpc == DEFAULT_VPC {
                let route = Route::default_nat();
                let has = rt.spec.routes.iter().position(|r| r == &route);
                let other = rt
                    .spec
                    .routes
                    .iter()
                    .any(|r| r.dst == route.dst && r != &route);
                match (default_nat && !other, has) {
                    (true, None) => rt.spec.routes.insert(0, route),
                    (false, Some(i)) => {
                        rt.spec.routes.remove(i);
                    }
                    _ => {}
                }
            }
            rt.spec.routes.retain(|r| {
                !(r.via.type_ == "connected"
                    && (r.via.l2_network.is_some() || r.via.subnet.is_some()))
            });
            let subnets = snap
                .subnets
                .iter()
                .filter(|s| s.spec.vpc == rt.spec.vpc)
                .map(|s| Route {
                    dst: s.spec.cidr.clone(),
                    via: Via {
                        type_: "connected".into(),
                        subnet: s.metadata.name.clone(),
                        ..Default::default()
                    },
                });
            let mut connected: Vec<Route> = snap
                .l2networks
                .iter()
                .filter(|l| l.spec.vpc == rt.spec.vpc && l.spec.gateway.is_some())
                .filter_map(|l| {
                    Some(Route {
                        dst: l.spec.cidr.clone()?,
                        via: Via {
                            type_: "connected".into(),
                            l2_network: l.metadata.name.clone(),
                            ..Default::default()
                        },
                    })
                })
                .chain(subnets)
                .collect();
            connected.sort_by(|a, b| a.dst.cmp(&b.dst));
            // A segment's own CIDR routes to it: a user route to the same prefix
            // (admitted before the segment existed) gives way, as a cloud's local route
            // is never overridden.
            rt.spec
                .routes
                .retain(|r| !connected.iter().any(|c| c.dst == r.dst));
            rt.spec.routes.extend(connected);
            rt
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        L2Network, Subnet,
        l2network::{L2Gateway, L2NetworkSpec},
        routetable::RouteTableSpec,
        subnet::SubnetSpec,
    };

    #[test]
    fn l2_14_gateway_and_subnet_routes_land_in_every_route_table_of_the_vpc() {
        let mut s = Snapshot::default();
        let user = Route {
            dst: "0.0.0.0/0".into(),
            via: Via {
                type_: "internetGateway".into(),
                ..Default::default()
            },
        };
        // Over a Subnet's own CIDR: gives way to its connected route.
        let shadowed = Route {
            dst: "10.71.0.0/24".into(),
            ..user.clone()
        };
        s.route_tables.push(RouteTable::new(
            "t",
            RouteTableSpec {
                vpc: "t".into(),
                routes: vec![user.clone(), shadowed],
            },
        ));
        s.route_tables.push(RouteTable::new(
            "t-extra",
            RouteTableSpec {
                vpc: "t".into(),
                routes: vec![],
            },
        ));
        s.route_tables.push(RouteTable::new(
            "other",
            RouteTableSpec {
                vpc: "o".into(),
                routes: vec![],
            },
        ));
        let gw = |name: &str, cidr: &str, gateway: bool| {
            L2Network::new(
                name,
                L2NetworkSpec {
                    vpc: "t".into(),
                    cidr: Some(cidr.into()),
                    gateway: gateway.then(L2Gateway::default),
                    ..Default::default()
                },
            )
        };
        s.l2networks.push(gw("routed", "10.7.0.0/24", true));
        s.l2networks.push(gw("closed", "10.8.0.0/24", false));
        s.subnets.push(Subnet::new(
            "web",
            SubnetSpec {
                vpc: "t".into(),
                cidr: "10.71.0.0/24".into(),
                network_acl: None,
            },
        ));
        let out = reconcile_all(&s, false);
        let web = Route {
            dst: "10.71.0.0/24".into(),
            via: Via {
                type_: "connected".into(),
                subnet: Some("web".into()),
                ..Default::default()
            },
        };
        let want = Route {
            dst: "10.7.0.0/24".into(),
            via: Via {
                type_: "connected".into(),
                l2_network: Some("routed".into()),
                ..Default::default()
            },
        };
        assert_eq!(
            out[0].spec.routes,
            vec![user, want.clone(), web.clone()],
            "user routes stay"
        );
        assert_eq!(out[1].spec.routes, vec![want, web]);
        assert!(
            out[2].spec.routes.is_empty(),
            "another Vpc's table is untouched"
        );
        // Idempotent.
        s.route_tables = out.clone();
        assert_eq!(reconcile_all(&s, false), out);
    }
}
