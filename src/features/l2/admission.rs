//! L2Network admission (L2-04, L2-05, L2-07, L2-08, L2-10, L2-11, L2-12, L2-16, L2-20,
//! L2-21).
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::admission::validate::{
    Snapshot, Verdict, reject,
    segment::{Segment, acl_of_vpc, cidr_of, overlaps},
};
use crate::api::{DEFAULT_VPC, L2Network};

fn name(l: &L2Network) -> &str {
    l.metadata.name.as_deref().unwrap_or("")
}

pub fn validate_l2network_create(new: &L2Network, snap: &Snapshot) -> Verdict {
    let spec = &new.spec;
    if spec.vpc.is_empty() {
        return Err(reject(
            "spec.vpc",
            "required: every L2Network belongs to exactly one Vpc",
        ));
    }
    if spec.vpc == DEFAULT_VPC {
        return Err(reject(
            "spec.vpc",
            "the default Vpc holds only the default Subnet; create a Vpc of your own for this L2Network",
        ));
    }
    if snap.vpc(&spec.vpc).is_none() {
        return Err(reject(
            "spec.vpc",
            format!("Vpc {:?} does not exist; create it first", spec.vpc),
        ));
    }
    if let Some(mtu) = spec.mtu
        && !(576..=9000).contains(&mtu)
    {
        return Err(reject("spec.mtu", format!("{mtu} is outside 576-9000")));
    }
    let cidr = match &spec.cidr {
        Some(c) => Some(cidr_of(c)?),
        None => None,
    };
    if let Some(net) = cidr {
        overlaps(Segment::L2Network(name(new)), &spec.vpc, net, snap)?;
    }
    gateway(new, cidr, snap)?;
    if let Some(acl) = &spec.network_acl {
        if spec.gateway.is_none() {
            return Err(reject(
                "spec.networkACL",
                "a NetworkACL acts only at the gateway; set spec.gateway (and spec.cidr) or remove spec.networkACL",
            ));
        }
        acl_of_vpc(acl, &spec.vpc, snap)?;
    }
    Ok(())
}

/// L2-10, L2-11, L2-12.
fn gateway(new: &L2Network, cidr: Option<Ipv4Net>, snap: &Snapshot) -> Verdict {
    let Some(gw) = &new.spec.gateway else {
        return Ok(());
    };
    let Some(net) = cidr else {
        return Err(reject(
            "spec.gateway",
            "requires spec.cidr: a gateway routes the segment's addresses; add spec.cidr or remove spec.gateway",
        ));
    };
    if let Some(addr) = &gw.address {
        let ip: Ipv4Addr = addr.parse().map_err(|_| {
            reject(
                "spec.gateway.address",
                format!("{addr} is not an IPv4 address"),
            )
        })?;
        if !net.contains(&ip) {
            return Err(reject(
                "spec.gateway.address",
                format!("{ip} is outside spec.cidr {net}"),
            ));
        }
        if ip == net.network() || ip == net.broadcast() {
            return Err(reject(
                "spec.gateway.address",
                format!("{ip} is the network or broadcast address of {net}; pick a host address"),
            ));
        }
    }
    if let Some(rt) = &gw.route_table {
        match snap.route_table(rt) {
            None => {
                return Err(reject(
                    "spec.gateway.routeTable",
                    format!("RouteTable {rt:?} does not exist"),
                ));
            }
            Some(t) if t.spec.vpc != new.spec.vpc => {
                return Err(reject(
                    "spec.gateway.routeTable",
                    format!(
                        "RouteTable {rt:?} belongs to Vpc {:?}, not {:?}",
                        t.spec.vpc, new.spec.vpc
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

pub fn validate_l2network_update(old: &L2Network, new: &L2Network, snap: &Snapshot) -> Verdict {
    if old.spec.vpc != new.spec.vpc {
        return Err(reject(
            "spec.vpc",
            "is immutable; create a new L2Network in the other Vpc instead",
        ));
    }
    if old.spec.cidr != new.spec.cidr {
        return Err(reject(
            "spec.cidr",
            "is immutable; create a new L2Network with the other CIDR instead",
        ));
    }
    validate_l2network_create(new, snap)?;
    // L2-16: a gateway added or moved onto an address a workload holds is refused.
    if let Some(gw) = new.gateway_address()
        && old.gateway_address() != Some(gw)
    {
        for nic in &snap.interfaces {
            let on_this = nic.spec.l2_network.as_deref() == Some(name(new));
            let held = nic.ip() == Some(gw);
            if on_this && held {
                return Err(reject(
                    "spec.gateway.address",
                    format!(
                        "address {gw} is already held by NetworkInterface {}/{}; choose another gateway address (the exclusion only stops new hand-outs, it reclaims nothing)",
                        nic.metadata.namespace.as_deref().unwrap_or(""),
                        nic.metadata.name.as_deref().unwrap_or("")
                    ),
                ));
            }
        }
    }
    Ok(())
}
