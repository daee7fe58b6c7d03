//! Deletion guards on the referenced side (L2-32): L2Network itself has no finalizer.
use super::{Snapshot, Verdict, reject};
use crate::api::L2Network;

/// Refuses when any L2Network matches `uses`; `message` gets their quoted names.
fn refuse_if_used(
    snap: &Snapshot,
    uses: impl Fn(&L2Network) -> bool,
    message: impl Fn(String) -> String,
) -> Verdict {
    let users: Vec<String> = snap
        .l2networks
        .iter()
        .filter(|l| uses(l))
        .filter_map(|l| l.metadata.name.as_deref().map(|n| format!("{n:?}")))
        .collect();
    if users.is_empty() {
        return Ok(());
    }
    Err(reject("metadata.name", message(users.join(", "))))
}

pub fn validate_delete_vpc(vpc: &str, snap: &Snapshot) -> Verdict {
    refuse_if_used(
        snap,
        |l| l.spec.vpc == vpc,
        |users| format!("Vpc {vpc:?} still has L2Networks {users}; delete them first"),
    )
}

pub fn validate_delete_route_table(rt: &str, snap: &Snapshot) -> Verdict {
    let Some(table) = snap.route_table(rt) else {
        return Ok(());
    };
    let uses = |l: &L2Network| {
        l.spec
            .gateway
            .as_ref()
            .is_some_and(|g| match &g.route_table {
                Some(r) => r == rt,
                // The default is the Vpc's main RouteTable, named after the Vpc.
                None => l.spec.vpc == rt && table.spec.vpc == l.spec.vpc,
            })
    };
    refuse_if_used(snap, uses, |users| {
        format!(
            "RouteTable {rt:?} is used by the gateway of L2Networks {users}; change or remove their gateways first"
        )
    })
}

pub fn validate_delete_network_acl(acl: &str, snap: &Snapshot) -> Verdict {
    refuse_if_used(
        snap,
        |l| l.spec.network_acl.as_deref() == Some(acl),
        |users| {
            format!(
                "NetworkACL {acl:?} is referenced by L2Networks {users}; remove spec.networkACL there first"
            )
        },
    )
}
