//! Deletion guards on the referenced side (L2-32): a Vpc, RouteTable or NetworkACL
//! goes only when no segment (L2Network or Subnet) uses it, a Subnet only when no
//! NetworkInterface is on it. The segments themselves have no finalizer.
use super::{Snapshot, Verdict, reject};
use crate::api::{L2Network, Subnet};

/// The segments that match, quoted and grouped by kind (`L2Networks "a", "b" and
/// Subnets "c"`), or `None` when nothing uses the object.
fn users(
    snap: &Snapshot,
    l2: impl Fn(&L2Network) -> bool,
    subnet: impl Fn(&Subnet) -> bool,
) -> Option<String> {
    fn quoted<'a, K: kube::Resource + 'a>(objects: impl Iterator<Item = &'a K>) -> String {
        objects
            .filter_map(|o| o.meta().name.as_deref().map(|n| format!("{n:?}")))
            .collect::<Vec<_>>()
            .join(", ")
    }
    let groups: Vec<String> = [
        (
            "L2Networks",
            quoted(snap.l2networks.iter().filter(|l| l2(l))),
        ),
        ("Subnets", quoted(snap.subnets.iter().filter(|s| subnet(s)))),
    ]
    .into_iter()
    .filter(|(_, names)| !names.is_empty())
    .map(|(kind, names)| format!("{kind} {names}"))
    .collect();
    (!groups.is_empty()).then(|| groups.join(" and "))
}

fn refuse(users: Option<String>, message: impl Fn(String) -> String) -> Verdict {
    match users {
        None => Ok(()),
        Some(users) => Err(reject("metadata.name", message(users))),
    }
}

pub fn validate_delete_vpc(vpc: &str, snap: &Snapshot) -> Verdict {
    refuse(
        users(snap, |l| l.spec.vpc == vpc, |s| s.spec.vpc == vpc),
        |users| format!("Vpc {vpc:?} still has {users}; delete them first"),
    )
}

pub fn validate_delete_route_table(rt: &str, snap: &Snapshot) -> Verdict {
    let Some(table) = snap.route_table(rt) else {
        return Ok(());
    };
    // The default is the Vpc's main RouteTable, named after the Vpc; a Subnet always
    // uses it.
    let main_of = |vpc: &str| vpc == rt && table.spec.vpc == vpc;
    let l2 = |l: &L2Network| {
        l.spec
            .gateway
            .as_ref()
            .is_some_and(|g| match &g.route_table {
                Some(r) => r == rt,
                None => main_of(&l.spec.vpc),
            })
    };
    refuse(users(snap, l2, |s| main_of(&s.spec.vpc)), |users| {
        format!(
            "RouteTable {rt:?} is used by the gateway of {users}; change or remove their gateways first"
        )
    })
}

pub fn validate_delete_network_acl(acl: &str, snap: &Snapshot) -> Verdict {
    let names = |n: &Option<String>| n.as_deref() == Some(acl);
    refuse(
        users(
            snap,
            |l| names(&l.spec.network_acl),
            |s| names(&s.spec.network_acl),
        ),
        |users| {
            format!(
                "NetworkACL {acl:?} is referenced by {users}; remove spec.networkACL there first"
            )
        },
    )
}

/// A Subnet goes only when no NetworkInterface is on it: its Pods would keep
/// addresses and routes the router no longer serves.
pub fn validate_delete_subnet(subnet: &str, snap: &Snapshot) -> Verdict {
    let nics: Vec<String> = snap
        .interfaces
        .iter()
        .filter(|n| n.spec.subnet.as_deref() == Some(subnet))
        .map(|n| {
            format!(
                "\"{}/{}\"",
                n.metadata.namespace.as_deref().unwrap_or(""),
                n.metadata.name.as_deref().unwrap_or("")
            )
        })
        .collect();
    if nics.is_empty() {
        return Ok(());
    }
    Err(reject(
        "metadata.name",
        format!(
            "Subnet {subnet:?} still has NetworkInterfaces {}; delete their Pods first",
            nics.join(", ")
        ),
    ))
}
