//! ElasticIP addresses: first fit over the ExternalNetwork's pools in their order, a
//! `requestedIP` honoured when it is in a pool and free, an address once given kept.
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use super::key;
use crate::{
    admission::validate::Snapshot,
    api::{ElasticIP, ExternalNetwork, addresspool},
    controller::{externalnetwork::pools_problem, l2network::oldest_first},
};

/// Why an ElasticIP has no address: its Allocated condition's reason and message.
pub type Unallocated = (&'static str, String);

/// Every ElasticIP's address (by `namespace/name`), or why it has none.
pub fn allocate(snap: &Snapshot) -> BTreeMap<String, Result<Ipv4Addr, Unallocated>> {
    let mut held: BTreeSet<Ipv4Addr> = snap
        .elastic_ips
        .iter()
        .filter_map(|e| e.status.as_ref()?.address.parse().ok())
        .chain(attachment_addresses(snap))
        .collect();
    // Addresses asked for by name are no one else's first fit.
    let requested: BTreeSet<Ipv4Addr> = snap
        .elastic_ips
        .iter()
        .filter(|e| e.status.as_ref().is_none_or(|s| s.address.is_empty()))
        .filter_map(|e| e.spec.requested_ip.as_deref()?.parse().ok())
        .collect();
    let mut out = BTreeMap::new();
    for e in oldest_first(&snap.elastic_ips) {
        let kept = e.status.as_ref().and_then(|s| s.address.parse().ok());
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

/// The usable address ranges of an ExternalNetwork's pools, in the pools' order: what
/// ElasticIPs and the Nodes' attachments (NAT-02) are handed out of, first fit.
pub fn pool_ranges(snap: &Snapshot, net: &ExternalNetwork) -> Vec<(Ipv4Addr, Ipv4Addr)> {
    net.spec
        .address_pools
        .iter()
        .filter_map(|p| snap.address_pool(p))
        .flat_map(|p| {
            p.spec
                .addresses
                .iter()
                .filter_map(|a| addresspool::usable(&p.spec.advertise_mode, a).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Addresses the Nodes' ExternalNetworkAttachments hold (NAT-02): no ElasticIP takes
/// one (one allocator for both).
fn attachment_addresses(snap: &Snapshot) -> impl Iterator<Item = Ipv4Addr> + '_ {
    snap.external_network_attachments
        .iter()
        .filter_map(|a| a.status.as_ref()?.assigned_ip.parse().ok())
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
    let ranges = pool_ranges(snap, net);
    if let Some(want) = e.spec.requested_ip.as_deref().filter(|r| !r.is_empty()) {
        let Ok(want) = want.parse::<Ipv4Addr>() else {
            return Err((
                "InvalidRequestedIP",
                format!("spec.requestedIP {want:?} is not an IPv4 address"),
            ));
        };
        if !ranges.iter().any(|(a, b)| (*a..=*b).contains(&want)) {
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
    ranges
        .iter()
        .find_map(|(a, b)| {
            (u32::from(*a)..=u32::from(*b))
                .map(Ipv4Addr::from)
                .find(|x| !held.contains(x) && !requested.contains(x))
        })
        .ok_or((
            "NoAddressAvailable",
            format!("no address is free in the AddressPools of ExternalNetwork {en:?}"),
        ))
}
