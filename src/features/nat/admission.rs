//! NATGateway admission (NAT-01): a Vpc that exists (or the default one, which the
//! controller makes) and an ExternalNetwork named (one that does not exist yet is
//! waited on: the gateway's Ready says so), both immutable;
//! deleted only when no RouteTable routes to it. A `natGateway` route names a
//! NATGateway of its own table's Vpc. An ExternalNetwork goes only when no NATGateway
//! uses it.
use crate::admission::validate::{Snapshot, Verdict, reject};
use crate::api::{DEFAULT_VPC, NATGateway, natgateway::DEFAULT_NAT_GATEWAY};

pub fn validate_nat_gateway_create(g: &NATGateway, snap: &Snapshot) -> Verdict {
    if g.spec.vpc.is_empty() {
        return Err(reject(
            "spec.vpc",
            "required: the Vpc whose RouteTables route to this NATGateway",
        ));
    }
    // The default Vpc is the controller's to make (at its start, maybe after this
    // request): a gateway of it waits for it, as its Ready says.
    if snap.vpc(&g.spec.vpc).is_none() && g.spec.vpc != DEFAULT_VPC {
        return Err(reject(
            "spec.vpc",
            format!("Vpc {:?} does not exist; create it first", g.spec.vpc),
        ));
    }
    if g.metadata.name.as_deref() == Some(DEFAULT_NAT_GATEWAY) && g.spec.vpc != DEFAULT_VPC {
        return Err(reject(
            "metadata.name",
            format!(
                "the NATGateway named {DEFAULT_NAT_GATEWAY:?} gives the default Vpc its default route and belongs to it; name this one of Vpc {:?} otherwise",
                g.spec.vpc
            ),
        ));
    }
    if g.spec.external_network.is_empty() {
        return Err(reject(
            "spec.externalNetwork",
            "required: the ExternalNetwork (type arp) whose pools give each Node its address",
        ));
    }
    Ok(())
}

pub fn validate_nat_gateway_update(old: &NATGateway, new: &NATGateway, snap: &Snapshot) -> Verdict {
    if old.spec.vpc != new.spec.vpc {
        return Err(reject(
            "spec.vpc",
            "is immutable; create another NATGateway for the other Vpc",
        ));
    }
    if old.spec.external_network != new.spec.external_network {
        return Err(reject(
            "spec.externalNetwork",
            "is immutable (each Node's address comes from it); create another NATGateway and route to it instead",
        ));
    }
    validate_nat_gateway_create(new, snap)
}

/// A NATGateway goes only when no RouteTable routes to it.
pub fn validate_delete_nat_gateway(name: &str, snap: &Snapshot) -> Verdict {
    let tables: Vec<String> = snap
        .route_tables
        .iter()
        .filter(|t| {
            t.spec.routes.iter().any(|r| {
                r.via.type_ == "natGateway"
                        && r.via.nat_gateway.as_deref() == Some(name)
                        // The default gateway's own route, which the controller writes
                        // and takes away again with the gateway.
                        && !(name == DEFAULT_NAT_GATEWAY
                            && t.metadata.name.as_deref() == Some(DEFAULT_VPC)
                            && *r == crate::api::routetable::Route::default_nat())
            })
        })
        .filter_map(|t| t.metadata.name.as_deref().map(|n| format!("{n:?}")))
        .collect();
    if tables.is_empty() {
        return Ok(());
    }
    Err(reject(
        "metadata.name",
        format!(
            "NATGateway {name:?} is routed to by RouteTables {}: remove those routes first",
            tables.join(", ")
        ),
    ))
}

/// An ExternalNetwork goes only when no NATGateway uses it (its Nodes' addresses).
pub fn validate_delete_external_network(name: &str, snap: &Snapshot) -> Verdict {
    let users: Vec<String> = snap
        .nat_gateways
        .iter()
        .filter(|g| g.spec.external_network == name)
        .filter_map(|g| g.metadata.name.as_deref().map(|n| format!("{n:?}")))
        .collect();
    if users.is_empty() {
        return Ok(());
    }
    Err(reject(
        "metadata.name",
        format!(
            "ExternalNetwork {name:?} gives the Nodes' addresses of NATGateways {}: delete them first",
            users.join(", ")
        ),
    ))
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
