//! BGPPeer and BGPAdvertisement admission (BGP-01, BGP-02): every refusal names its
//! field and what to write instead. The ranges are admission rules, not only schema
//! bounds: the embedded store has no schema to check them.
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::{
    admission::validate::{Snapshot, Verdict, reject},
    api::{
        BGPAdvertisement, BGPPeer,
        externalnetwork::{BGP_SPEAKER_ON_NODES, TYPE_BGP},
        net::parse_cidr,
    },
};

fn asn(field: &str, v: u32) -> Verdict {
    match v {
        0 => Err(reject(
            field,
            "0 is not an AS number: use 1-4294967294 (private: 64512-65534, 4200000000-4294967294)",
        )),
        u32::MAX => Err(reject(
            field,
            "4294967295 is reserved (RFC 7300): use 1-4294967294",
        )),
        _ => Ok(()),
    }
}

/// The refusal of a well-formed BGP object while the Nodes run no speaker
/// (`BGP_SPEAKER_ON_NODES`).
pub fn speaker_not_built(kind: &str) -> Verdict {
    if BGP_SPEAKER_ON_NODES {
        return Ok(());
    }
    Err(reject(
        "kind",
        format!(
            "{kind}: the Nodes' BGP speaker is not built yet (issue 27): nothing would announce a bgp ExternalNetwork's addresses; use type arp meanwhile"
        ),
    ))
}

pub fn validate_bgp_peer_create(peer: &BGPPeer, snap: &Snapshot) -> Verdict {
    let s = &peer.spec;
    asn("spec.myASN", s.my_asn)?;
    asn("spec.peerASN", s.peer_asn)?;
    let address: Ipv4Addr = s.peer_address.parse().map_err(|_| {
        reject(
            "spec.peerAddress",
            format!(
                "{:?} is not an IPv4 address: BGP peers are IPv4 only (write a.b.c.d)",
                s.peer_address
            ),
        )
    })?;
    if let Some((node, _)) = snap.node_addresses.iter().find(|(_, a)| *a == address) {
        return Err(reject(
            "spec.peerAddress",
            format!(
                "{address} is the InternalIP of Node {node:?}: a BGPPeer is a router outside the cluster, every Node's speaker peers with it"
            ),
        ));
    }
    let me = peer.metadata.name.as_deref().unwrap_or("");
    if let Some(other) = snap
        .bgp_peers
        .iter()
        .find(|p| p.metadata.name.as_deref() != Some(me) && p.spec.address() == Some(address))
    {
        return Err(reject(
            "spec.peerAddress",
            format!(
                "{address} is already BGPPeer {:?}'s: one BGPPeer per address",
                other.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    if let Some(port) = s.peer_port
        && !(1..=65535).contains(&port)
    {
        return Err(reject(
            "spec.peerPort",
            format!("{port} is not a port: 1-65535 (179 when omitted)"),
        ));
    }
    if let Some(h) = s.hold_time
        && (h == 1 || h == 2 || h > 65535)
    {
        return Err(reject(
            "spec.holdTime",
            format!("{h}: use 0 (no keepalives) or 3-65535 seconds"),
        ));
    }
    if let Some(b) = &s.bfd {
        if let Some(i) = b.interval_ms
            && i < 10
        {
            return Err(reject(
                "spec.bfd.intervalMs",
                format!("{i} is below 10 ms: use 10 or more (100 when omitted)"),
            ));
        }
        if let Some(m) = b.multiplier
            && !(1..=255).contains(&m)
        {
            return Err(reject(
                "spec.bfd.multiplier",
                format!("{m}: use 1-255 (3 when omitted)"),
            ));
        }
    }
    Ok(())
}

pub fn validate_bgp_peer_update(_old: &BGPPeer, new: &BGPPeer, snap: &Snapshot) -> Verdict {
    validate_bgp_peer_create(new, snap)
}

/// The CIDRs of a bgp pool, as written (each element is one).
fn pool_cidrs(snap: &Snapshot, pool: &str) -> Vec<Ipv4Net> {
    snap.address_pools
        .iter()
        .filter(|p| p.metadata.name.as_deref() == Some(pool))
        .flat_map(|p| p.spec.addresses.iter())
        .filter_map(|a| a.parse::<Ipv4Net>().ok())
        .map(|n| n.trunc())
        .collect()
}

pub fn validate_bgp_advertisement_create(adv: &BGPAdvertisement, snap: &Snapshot) -> Verdict {
    let s = &adv.spec;
    if s.address_pools.is_empty() {
        return Err(reject("spec.addressPools", "list at least one AddressPool"));
    }
    for (i, name) in s.address_pools.iter().enumerate() {
        // A pool not written yet is admitted (objects come in any order); the Nodes'
        // BGPNodeStates report it until it is.
        if let Some(p) = snap.address_pool(name)
            && p.spec.advertise_mode != TYPE_BGP
        {
            return Err(reject(
                format!("spec.addressPools[{i}]"),
                format!(
                    "AddressPool {name:?} has advertiseMode {}: a BGPAdvertisement announces bgp pools only",
                    p.spec.advertise_mode
                ),
            ));
        }
    }
    if let Some(prefix) = s.prefix.as_deref() {
        let net = parse_cidr(prefix).map_err(|m| reject("spec.prefix", m))?;
        let listed: Vec<(String, Vec<Ipv4Net>)> = s
            .address_pools
            .iter()
            .filter(|n| snap.address_pool(n).is_some())
            .map(|n| (n.clone(), pool_cidrs(snap, n)))
            .collect();
        let inside = listed
            .iter()
            .any(|(_, cidrs)| cidrs.iter().any(|c| c.contains(&net)));
        if !listed.is_empty() && !inside {
            let shown: Vec<String> = listed
                .iter()
                .map(|(n, c)| {
                    let c: Vec<String> = c.iter().map(|c| c.to_string()).collect();
                    format!("{n}: {}", c.join(", "))
                })
                .collect();
            return Err(reject(
                "spec.prefix",
                format!(
                    "{net} lies in none of the CIDRs of spec.addressPools ({}): name a prefix inside one of them",
                    shown.join("; ")
                ),
            ));
        }
    }
    Ok(())
}

pub fn validate_bgp_advertisement_update(
    _old: &BGPAdvertisement,
    new: &BGPAdvertisement,
    snap: &Snapshot,
) -> Verdict {
    validate_bgp_advertisement_create(new, snap)
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
