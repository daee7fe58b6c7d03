//! AddressPool (seed 003): public addresses an ExternalNetwork hands to ElasticIPs.
//! `arp` pools are inclusive ranges on the Nodes' own L2 (`a.b.c.d-e.f.g.h`), `bgp`
//! pools CIDRs announced by the Nodes (network and broadcast addresses never used).
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "AddressPool",
    printcolumn(name = "MODE", type_ = "string", json_path = ".spec.advertiseMode")
)]
#[serde(rename_all = "camelCase")]
pub struct AddressPoolSpec {
    /// `arp` or `bgp`; must equal the type of the ExternalNetwork that lists the pool.
    pub advertise_mode: String,
    /// `arp`: `first-last` ranges; `bgp`: CIDRs. Append-only.
    pub addresses: Vec<String>,
}

/// One element of `spec.addresses`, read for its mode: the usable addresses, first to
/// last inclusive.
pub fn usable(mode: &str, element: &str) -> Result<(Ipv4Addr, Ipv4Addr), String> {
    if mode == super::externalnetwork::TYPE_ARP {
        let (a, b) = element.split_once('-').ok_or_else(|| {
            format!("{element:?} is not a range: write first-last, as 192.0.2.10-192.0.2.20")
        })?;
        let first: Ipv4Addr = a
            .trim()
            .parse()
            .map_err(|_| format!("{a:?} in {element:?} is not an IPv4 address"))?;
        let last: Ipv4Addr = b
            .trim()
            .parse()
            .map_err(|_| format!("{b:?} in {element:?} is not an IPv4 address"))?;
        if first > last {
            return Err(format!(
                "{element:?} starts after it ends: write the lower address first"
            ));
        }
        return Ok((first, last));
    }
    let net: Ipv4Net = element.parse().map_err(|_| {
        format!("{element:?} is not an IPv4 CIDR (a bgp pool takes CIDRs, as 203.0.113.0/27)")
    })?;
    if !(8..=32).contains(&net.prefix_len()) {
        return Err(format!("{element:?}: a bgp pool's prefix is /8 to /32"));
    }
    if net.prefix_len() >= 31 {
        return Ok((net.network(), net.broadcast()));
    }
    let next = |a: Ipv4Addr, d: i64| Ipv4Addr::from((u32::from(a) as i64 + d) as u32);
    Ok((next(net.network(), 1), next(net.broadcast(), -1)))
}
