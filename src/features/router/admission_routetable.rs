//! RouteTable admission: a Vpc that exists (and stays), one route per destination, each
//! destination an IPv4 prefix, each `via` a known type, an endpoint named as
//! `<namespace>/<pod>.<interface>`, and no user route over a segment's own CIDR (the
//! controller writes that connected route; a route may be more specific). A route of a
//! kind the datapath does not build yet ([`NOT_BUILT`]) is refused when it is new: it
//! would be dropped by name (`ROUTE_UNSUPPORTED`), and a route one believes in effect
//! that carries nothing is worse than a refusal (seed 000). A table that already held
//! one (from before this rule) stays editable.
use std::collections::BTreeMap;

use crate::api::{RouteTable, routetable::Route};
use crate::{
    admission::validate::{Snapshot, Verdict, reject},
    api::net::parse_cidr,
};

/// The `via.type`s a new route may have: the ones the datapath builds (`service` and
/// `vpcEndpoint` are the controller's own).
pub const ROUTE_TYPES: [&str; 6] = [
    "connected",
    "endpoint",
    "internetGateway",
    "natGateway",
    "service",
    "vpcEndpoint",
];

/// The route types of later waves: known, but no datapath carries them yet (peering,
/// transit, VPN). Refused when new; dropped by name (`ROUTE_UNSUPPORTED`) where a
/// table held one before.
pub const NOT_BUILT: [&str; 3] = ["vpcPeering", "transitGateway", "vpn"];

/// Whether `old` (the table before an update) held the same route already.
fn held(r: &Route, old: Option<&RouteTable>) -> bool {
    old.is_some_and(|o| {
        o.spec.routes.iter().any(|p| {
            p.dst == r.dst
                && p.via.type_ == r.via.type_
                // A natGateway route is held only as it was: one renamed to another
                // gateway is new, and checked.
                && (r.via.type_ != "natGateway" || p == r)
        })
    })
}

/// Refuses route `i` when its kind has no datapath yet and `old` (the table before an
/// update) did not hold the same route already.
fn not_built(i: usize, r: &Route, old: Option<&RouteTable>) -> Verdict {
    let ty = r.via.type_.as_str();
    if !NOT_BUILT.contains(&ty) || held(r, old) {
        return Ok(());
    }
    Err(reject(
        format!("spec.routes[{i}].via.type"),
        format!(
            "{ty:?} routes have no datapath yet: they would be dropped (ROUTE_UNSUPPORTED), so they are refused until it is built; route by a connected or endpoint route instead"
        ),
    ))
}

fn route(i: usize, r: &Route, table: &RouteTable, snap: &Snapshot) -> Verdict {
    let field = |f: &str| format!("spec.routes[{i}].{f}");
    let dst = parse_cidr(&r.dst).map_err(|m| reject(field("dst"), m))?;
    let ty = r.via.type_.as_str();
    if !ROUTE_TYPES.contains(&ty) && !NOT_BUILT.contains(&ty) {
        return Err(reject(
            field("via.type"),
            format!(
                "{ty:?} is not a route type; use one of {}",
                ROUTE_TYPES.join(", ")
            ),
        ));
    }
    if ty == "endpoint" {
        let well_formed = r.via.endpoint.as_deref().is_some_and(|e| {
            e.split_once('/')
                .is_some_and(|(ns, nic)| !ns.is_empty() && nic.contains('.'))
        });
        if !well_formed {
            return Err(reject(
                field("via.endpoint"),
                "type endpoint needs the next hop's NIC as <namespace>/<pod>.<interface> (e.g. default/router.eth1)",
            ));
        }
    }
    if ty != "connected" {
        let vpc = &table.spec.vpc;
        let own = snap
            .subnets
            .iter()
            .filter(|s| &s.spec.vpc == vpc)
            .map(|s| (&s.spec.cidr, "Subnet", s.metadata.name.as_deref()))
            .chain(
                snap.l2networks
                    .iter()
                    .filter(|l| &l.spec.vpc == vpc && l.spec.gateway.is_some())
                    .filter_map(|l| {
                        Some((
                            l.spec.cidr.as_ref()?,
                            "L2Network",
                            l.metadata.name.as_deref(),
                        ))
                    }),
            )
            .find(|(c, _, _)| c.parse().ok() == Some(dst));
        if let Some((cidr, kind, name)) = own {
            return Err(reject(
                field("dst"),
                format!(
                    "{cidr} is the CIDR of {kind} {:?}, whose connected route the controller writes; route a more specific prefix instead",
                    name.unwrap_or("")
                ),
            ));
        }
    }
    Ok(())
}

pub fn validate_route_table_create(new: &RouteTable, snap: &Snapshot) -> Verdict {
    validate(None, new, snap)
}

/// Both operations: `old` is the table before an update.
fn validate(old: Option<&RouteTable>, new: &RouteTable, snap: &Snapshot) -> Verdict {
    if new.spec.vpc.is_empty() {
        return Err(reject(
            "spec.vpc",
            "required: every RouteTable belongs to exactly one Vpc",
        ));
    }
    if snap.vpc(&new.spec.vpc).is_none() {
        return Err(reject(
            "spec.vpc",
            format!("Vpc {:?} does not exist; create it first", new.spec.vpc),
        ));
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in new.spec.routes.iter().enumerate() {
        route(i, r, new, snap)?;
        not_built(i, r, old)?;
        if r.via.type_ == "natGateway" && !held(r, old) {
            nat_route(i, r, &new.spec.vpc, snap)?;
        }
        let key = r.dst.clone();
        if let Some(first) = seen.insert(key, i) {
            return Err(reject(
                format!("spec.routes[{i}].dst"),
                format!(
                    "{} is already the destination of spec.routes[{first}]; a table holds one route per destination",
                    r.dst
                ),
            ));
        }
    }
    Ok(())
}

pub fn validate_route_table_update(old: &RouteTable, new: &RouteTable, snap: &Snapshot) -> Verdict {
    if old.spec.vpc != new.spec.vpc {
        return Err(reject(
            "spec.vpc",
            "is immutable; create a RouteTable in the other Vpc instead",
        ));
    }
    // NAT-03: the attachments of the table's Subnets go out by its internet gateway.
    let igw = |t: &RouteTable| {
        t.spec
            .routes
            .iter()
            .any(|r| r.via.type_ == "internetGateway")
    };
    if igw(old) && !igw(new) {
        let users = attachments_routed_by(old.metadata.name.as_deref().unwrap_or(""), snap);
        if !users.is_empty() {
            return Err(reject(
                "spec.routes",
                format!(
                    "ElasticIPAttachments {} go out by this table's internetGateway route; delete them first",
                    users.join(", ")
                ),
            ));
        }
    }
    validate(Some(old), new, snap)
}

/// Route `i` of a table of `vpc`, of type `natGateway`: it names a NATGateway of the
/// same Vpc. Whether that gateway is Ready is its status's business: until a Node has
/// an address, what the route matches there is dropped by name (`NAT_NO_ADDRESS`).
pub fn nat_route(i: usize, r: &Route, vpc: &str, snap: &Snapshot) -> Verdict {
    let field = format!("spec.routes[{i}].via.natGateway");
    let Some(name) = r.via.nat_gateway.as_deref().filter(|n| !n.is_empty()) else {
        return Err(reject(
            field,
            "type natGateway needs the NATGateway's name (natGateway: <name>)",
        ));
    };
    let Some(g) = snap.nat_gateway(name) else {
        return Err(reject(
            field,
            format!("NATGateway {name:?} does not exist; create it first"),
        ));
    };
    if g.spec.vpc != vpc {
        return Err(reject(
            field,
            format!(
                "NATGateway {name:?} belongs to Vpc {:?}, not to this table's Vpc {vpc:?}; route to a NATGateway of {vpc:?}",
                g.spec.vpc
            ),
        ));
    }
    Ok(())
}

/// The attachments whose NIC (made already) is on a Subnet that routes by RouteTable
/// `table`: they go out by its `internetGateway` route.
pub fn attachments_routed_by(table: &str, snap: &Snapshot) -> Vec<String> {
    snap.elastic_ip_attachments
        .iter()
        .filter(|a| {
            let wanted = &a.spec.target_ref.network_interface_name;
            snap.interfaces
                .iter()
                .find(|n| {
                    n.metadata.namespace.as_deref().unwrap_or("default")
                        == a.metadata.namespace.as_deref().unwrap_or("default")
                        && n.metadata.name.as_deref() == Some(wanted.as_str())
                })
                .and_then(|n| snap.subnet(n.spec.subnet.as_deref()?))
                .is_some_and(|s| snap.table_of(&s.spec.vpc, None) == table)
        })
        .map(|a| {
            format!(
                "{}/{}",
                a.metadata.namespace.as_deref().unwrap_or("default"),
                a.metadata.name.as_deref().unwrap_or("")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        Subnet, Vpc,
        routetable::{RouteTableSpec, Via},
        subnet::SubnetSpec,
        vpc::VpcSpec,
    };

    fn via(dst: &str, ty: &str, endpoint: Option<&str>) -> Route {
        Route {
            dst: dst.into(),
            via: Via {
                type_: ty.into(),
                endpoint: endpoint.map(Into::into),
                ..Default::default()
            },
        }
    }

    fn table(routes: Vec<Route>) -> RouteTable {
        RouteTable::new(
            "a",
            RouteTableSpec {
                vpc: "a".into(),
                routes,
            },
        )
    }

    fn snap() -> Snapshot {
        Snapshot {
            vpcs: vec![Vpc::new("a", VpcSpec::default())],
            subnets: vec![Subnet::new(
                "web",
                SubnetSpec {
                    vpc: "a".into(),
                    cidr: "10.81.0.0/24".into(),
                    network_acl: None,
                },
            )],
            ..Default::default()
        }
    }

    fn msg(v: Verdict) -> String {
        v.unwrap_err().to_string()
    }

    #[test]
    fn l2_14_route_tables_hold_one_well_formed_route_per_destination() {
        let s = snap();
        let check = |routes| validate_route_table_create(&table(routes), &s);
        assert!(
            check(vec![
                via("192.168.50.0/24", "endpoint", Some("default/router.eth1")),
                via("0.0.0.0/0", "endpoint", Some("default/router.eth1")),
                via("10.81.0.0/25", "endpoint", Some("default/router.eth1")),
            ])
            .is_ok(),
            "a more specific prefix than a Subnet's is allowed"
        );
        assert_eq!(
            msg(check(vec![
                via("192.168.50.0/24", "endpoint", Some("default/q.eth1")),
                via("192.168.50.0/24", "endpoint", Some("default/r.eth1")),
            ])),
            "spec.routes[1].dst: 192.168.50.0/24 is already the destination of spec.routes[0]; a table holds one route per destination"
        );
        assert_eq!(
            msg(check(vec![via("192.168.50.1/24", "vpn", None)])),
            "spec.routes[0].dst: 192.168.50.1/24 has host bits set; use 192.168.50.0/24"
        );
        assert!(
            msg(check(vec![via("192.168.50.0/24", "teleport", None)]))
                .starts_with("spec.routes[0].via.type: \"teleport\" is not a route type; use one of connected, endpoint,")
        );
        for bad in [None, Some("router.eth1"), Some("default/router")] {
            assert_eq!(
                msg(check(vec![via("192.168.50.0/24", "endpoint", bad)])),
                "spec.routes[0].via.endpoint: type endpoint needs the next hop's NIC as <namespace>/<pod>.<interface> (e.g. default/router.eth1)",
                "{bad:?}"
            );
        }
        assert_eq!(
            msg(check(vec![via(
                "10.81.0.0/24",
                "endpoint",
                Some("default/r.eth1")
            )])),
            "spec.routes[0].dst: 10.81.0.0/24 is the CIDR of Subnet \"web\", whose connected route the controller writes; route a more specific prefix instead"
        );
        let mut moved = table(vec![]);
        moved.spec.vpc = "b".into();
        assert!(
            msg(validate_route_table_update(&table(vec![]), &moved, &s))
                .starts_with("spec.vpc: is immutable")
        );
    }

    #[test]
    fn l2_14_a_new_route_of_a_kind_without_a_datapath_is_refused_and_a_held_one_stays_editable() {
        let s = snap();
        for ty in NOT_BUILT {
            let new = table(vec![
                via("192.168.50.0/24", "endpoint", Some("default/r.eth1")),
                via("0.0.0.0/0", ty, None),
            ]);
            assert_eq!(
                msg(validate_route_table_create(&new, &s)),
                format!(
                    "spec.routes[1].via.type: {ty:?} routes have no datapath yet: they would be dropped (ROUTE_UNSUPPORTED), so they are refused until it is built; route by a connected or endpoint route instead"
                )
            );
            // A table that held the route before this rule: other edits go through,
            // the held route stays; a second such route is new, and refused.
            let old = table(vec![via("0.0.0.0/0", ty, None)]);
            assert!(validate_route_table_update(&old, &new, &s).is_ok(), "{ty}");
            let mut more = new.clone();
            more.spec.routes.push(via("198.51.100.0/24", ty, None));
            assert!(
                msg(validate_route_table_update(&old, &more, &s))
                    .starts_with("spec.routes[2].via.type: "),
                "{ty}"
            );
        }
        // The built kinds and the automatic ones are not affected.
        let built = table(vec![
            via("192.168.50.0/24", "endpoint", Some("default/r.eth1")),
            via("10.81.0.0/25", "connected", None),
        ]);
        assert!(validate_route_table_create(&built, &s).is_ok());
    }

    #[test]
    fn nat_03_an_internet_gateway_route_is_accepted_in_a_vpc_table() {
        let s = snap();
        let new = table(vec![via("0.0.0.0/0", "internetGateway", None)]);
        assert!(validate_route_table_create(&new, &s).is_ok());
        // Still one route per destination, and never over a Subnet's own CIDR.
        let twice = table(vec![
            via("0.0.0.0/0", "internetGateway", None),
            via("0.0.0.0/0", "endpoint", Some("default/r.eth1")),
        ]);
        assert!(msg(validate_route_table_create(&twice, &s)).starts_with("spec.routes[1].dst: "));
        let over = table(vec![via("10.81.0.0/24", "internetGateway", None)]);
        assert!(
            msg(validate_route_table_create(&over, &s))
                .starts_with("spec.routes[0].dst: 10.81.0.0/24 is the CIDR of Subnet")
        );
    }
}
