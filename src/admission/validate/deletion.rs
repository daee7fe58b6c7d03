//! Deletion guards on the referenced side (L2-32, POL-03): a Vpc, RouteTable or
//! NetworkACL goes only when no segment (L2Network or Subnet) uses it (a Vpc also only
//! when none of its NetworkACLs and SecurityGroups is left), a Subnet only
//! when no NetworkInterface is on it, a SecurityGroup only when no NetworkInterface
//! carries it and no other group names it as a peer. The segments themselves have no
//! finalizer.
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

/// A Vpc goes only when nothing of it is left: its segments, and its NetworkACLs and
/// SecurityGroups (rules whose Vpc is gone would name peers nothing can reach).
pub fn validate_delete_vpc(vpc: &str, snap: &Snapshot) -> Verdict {
    let named = |names: Vec<&str>| {
        names
            .into_iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let acls = named(
        snap.network_acls
            .iter()
            .filter(|a| a.spec.vpc == vpc)
            .filter_map(|a| a.metadata.name.as_deref())
            .collect(),
    );
    let groups = named(
        snap.security_groups
            .iter()
            .filter(|g| g.spec.vpc == vpc)
            .filter_map(|g| g.metadata.name.as_deref())
            .collect(),
    );
    let all: Vec<String> = users(snap, |l| l.spec.vpc == vpc, |s| s.spec.vpc == vpc)
        .into_iter()
        .chain((!acls.is_empty()).then(|| format!("NetworkACLs {acls}")))
        .chain((!groups.is_empty()).then(|| format!("SecurityGroups {groups}")))
        .collect();
    refuse((!all.is_empty()).then(|| all.join(" and ")), |users| {
        format!("Vpc {vpc:?} still has {users}; delete them first")
    })
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

/// What still uses SecurityGroup `sg`: the NetworkInterfaces that carry it and the
/// other groups whose peers name it (a group naming itself does not count), quoted
/// and grouped by kind; `None` when nothing does.
pub(crate) fn security_group_users(sg: &str, snap: &Snapshot) -> Option<String> {
    let nics: Vec<String> = snap
        .interfaces
        .iter()
        .filter(|n| n.spec.security_groups.iter().any(|g| g == sg))
        .map(|n| format!("{:?}", crate::cluster::key(n)))
        .collect();
    let groups: Vec<String> = snap
        .security_groups
        .iter()
        .filter(|g| g.metadata.name.as_deref() != Some(sg))
        .filter(|g| {
            let ingress = g.spec.ingress.iter().flatten().flat_map(|r| &r.from);
            let egress = g.spec.egress.iter().flatten().flat_map(|r| &r.to);
            ingress
                .chain(egress)
                .any(|p| p.security_group_ref.as_ref().is_some_and(|r| r.name == sg))
        })
        .map(|g| format!("{:?}", g.metadata.name.as_deref().unwrap_or("")))
        .collect();
    let parts: Vec<String> = [("NetworkInterfaces", nics), ("SecurityGroups", groups)]
        .into_iter()
        .filter(|(_, names)| !names.is_empty())
        .map(|(kind, names)| format!("{kind} {}", names.join(", ")))
        .collect();
    (!parts.is_empty()).then(|| parts.join(" and "))
}

/// POL-03: a group still carried by a NIC or named by another group's peer stays: the
/// datapath would lose the rules or the members those name.
pub fn validate_delete_security_group(sg: &str, snap: &Snapshot) -> Verdict {
    refuse(security_group_users(sg, snap), |users| {
        format!(
            "SecurityGroup {sg:?} is used by {users}; delete those Pods or remove the group from their annotations, and remove the securityGroupRef peers, first"
        )
    })
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

/// An AddressPool goes only when no ExternalNetwork lists it and no BGPAdvertisement
/// announces it (the anchor's rule): its addresses would be handed out, or announced,
/// from a pool that is gone.
pub fn validate_delete_address_pool(pool: &str, snap: &Snapshot) -> Verdict {
    let named = |pools: &[String]| pools.iter().any(|p| p == pool);
    let user = snap
        .external_networks
        .iter()
        .find(|n| named(&n.spec.address_pools))
        .map(|n| ("listed by ExternalNetwork", n.metadata.name.clone()))
        .or_else(|| {
            snap.bgp_advertisements
                .iter()
                .find(|a| named(&a.spec.address_pools))
                .map(|a| ("announced by BGPAdvertisement", a.metadata.name.clone()))
        });
    match user {
        Some((how, name)) => Err(reject(
            "metadata.name",
            format!(
                "AddressPool {pool:?} is {how} {:?}: edit or delete it first",
                name.unwrap_or_default()
            ),
        )),
        None => Ok(()),
    }
}
