//! Deletion guards on the referenced side (L2-32): L2Network itself has no finalizer.
use super::{Snapshot, Verdict, reject};

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
}

pub fn validate_delete_vpc(vpc: &str, snap: &Snapshot) -> Verdict {
    let users: Vec<&str> = snap
        .l2networks
        .iter()
        .filter(|l| l.spec.vpc == vpc)
        .filter_map(|l| l.metadata.name.as_deref())
        .collect();
    if users.is_empty() {
        return Ok(());
    }
    Err(reject(
        "metadata.name",
        format!(
            "Vpc {vpc:?} still has L2Networks {}; delete them first",
            names(users.into_iter())
        ),
    ))
}

pub fn validate_delete_route_table(rt: &str, snap: &Snapshot) -> Verdict {
    let Some(table) = snap.route_table(rt) else {
        return Ok(());
    };
    let users: Vec<&str> = snap
        .l2networks
        .iter()
        .filter(|l| {
            l.spec
                .gateway
                .as_ref()
                .is_some_and(|g| match &g.route_table {
                    Some(r) => r == rt,
                    // The default is the Vpc's main RouteTable, named after the Vpc.
                    None => l.spec.vpc == rt && table.spec.vpc == l.spec.vpc,
                })
        })
        .filter_map(|l| l.metadata.name.as_deref())
        .collect();
    if users.is_empty() {
        return Ok(());
    }
    Err(reject(
        "metadata.name",
        format!(
            "RouteTable {rt:?} is used by the gateway of L2Networks {}; change or remove their gateways first",
            names(users.into_iter())
        ),
    ))
}

pub fn validate_delete_network_acl(acl: &str, snap: &Snapshot) -> Verdict {
    let users: Vec<&str> = snap
        .l2networks
        .iter()
        .filter(|l| l.spec.network_acl.as_deref() == Some(acl))
        .filter_map(|l| l.metadata.name.as_deref())
        .collect();
    if users.is_empty() {
        return Ok(());
    }
    Err(reject(
        "metadata.name",
        format!(
            "NetworkACL {acl:?} is referenced by L2Networks {}; remove spec.networkACL there first",
            names(users.into_iter())
        ),
    ))
}
