//! ElasticIP addresses: first fit over the ExternalNetwork's pools in their order, a
//! `requestedIP` honoured when it is in a pool and free, an address once given kept.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use super::key;
use crate::{
    admission::validate::Snapshot,
    alloc::Pool,
    api::ElasticIP,
    controller::{
        externalnetwork::{Unallocated, pools_problem},
        segments::oldest_first,
    },
};

/// Every ElasticIP's address (by `namespace/name`), or why it has none.
pub fn allocate(snap: &Snapshot) -> BTreeMap<String, Result<Ipv4Addr, Unallocated>> {
    let mut held: BTreeSet<Ipv4Addr> = snap
        .elastic_ips
        .iter()
        .filter_map(|e| e.status.as_ref()?.address)
        .chain(attachment_addresses(snap))
        .collect();
    // Addresses asked for by name are no one else's first fit.
    let requested: BTreeSet<Ipv4Addr> = snap
        .elastic_ips
        .iter()
        .filter(|e| e.status.as_ref().is_none_or(|s| s.address.is_none()))
        .filter_map(|e| e.spec.requested_ip.as_deref()?.parse().ok())
        .collect();
    let mut out = BTreeMap::new();
    for e in oldest_first(&snap.elastic_ips) {
        let kept = e.status.as_ref().and_then(|s| s.address);
        let got = match kept {
            Some(a) => Ok(a),
            None if e.metadata.deletion_timestamp.is_some() => Err((
                "Deleting",
                "the ElasticIP is being deleted: no address is handed out".to_owned(),
            )),
            None => one(snap, e, &held, &requested),
        };
        if let Ok(a) = got {
            held.insert(a);
        }
        out.insert(key(e), got);
    }
    out
}

/// Addresses the Nodes' ExternalNetworkAttachments hold (NAT-02): no ElasticIP takes
/// one (one allocator for both).
fn attachment_addresses(snap: &Snapshot) -> impl Iterator<Item = Ipv4Addr> + '_ {
    snap.external_network_attachments
        .iter()
        .filter_map(|a| a.status.as_ref()?.assigned_ip)
}

fn one(
    snap: &Snapshot,
    e: &ElasticIP,
    held: &BTreeSet<Ipv4Addr>,
    requested: &BTreeSet<Ipv4Addr>,
) -> Result<Ipv4Addr, Unallocated> {
    let en = &e.spec.external_network;
    if en.is_empty() {
        return Err((
            "MissingDependency",
            "spec.externalNetwork is empty: name an ExternalNetwork".into(),
        ));
    }
    let Some(net) = snap.external_network(en) else {
        return Err((
            "MissingDependency",
            format!("ExternalNetwork {en:?} not found"),
        ));
    };
    if let Some(problem) = pools_problem(snap, &net.spec.type_, &net.spec.address_pools) {
        return Err(problem);
    }
    let ranges = snap.pool_ranges(net);
    if let Some(want) = e.spec.requested_ip.as_deref().filter(|r| !r.is_empty()) {
        let Ok(want) = want.parse::<Ipv4Addr>() else {
            return Err((
                "InvalidRequestedIP",
                format!("spec.requestedIP {want:?} is not an IPv4 address"),
            ));
        };
        if !Pool::new(ranges).contains(want) {
            return Err((
                "InvalidRequestedIP",
                format!("spec.requestedIP {want} is in no AddressPool of ExternalNetwork {en:?}"),
            ));
        }
        if held.contains(&want) {
            return Err((
                "RequestedIPInUse",
                format!(
                    "spec.requestedIP {want} is held by another ElasticIP or a Node's ExternalNetworkAttachment"
                ),
            ));
        }
        return Ok(want);
    }
    let mut pool = Pool::new(ranges);
    for h in held {
        pool.hold(*h);
    }
    for r in requested {
        pool.avoid(*r);
    }
    pool.first_free().ok_or((
        "NoAddressAvailable",
        format!("no address is free in the AddressPools of ExternalNetwork {en:?}"),
    ))
}
