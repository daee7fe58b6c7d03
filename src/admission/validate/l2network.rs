//! L2Network admission (L2-04, L2-05, L2-07, L2-08, L2-10, L2-11, L2-12, L2-16, L2-20,
//! L2-21).
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::{Snapshot, Verdict, cidr::parse_cidr, reject};
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
        Some(c) => Some(parse_cidr(c).map_err(|m| reject("spec.cidr", m))?),
        None => None,
    };
    if let Some(net) = cidr {
        if !(16..=28).contains(&net.prefix_len()) {
            return Err(reject(
                "spec.cidr",
                format!("/{} is outside /16 to /28", net.prefix_len()),
            ));
        }
        overlaps(name(new), &spec.vpc, net, snap)?;
    }
    gateway(new, cidr, snap)?;
    if let Some(acl) = &spec.network_acl {
        if spec.gateway.is_none() {
            return Err(reject(
                "spec.networkACL",
                "a NetworkACL acts only at the gateway; set spec.gateway (and spec.cidr) or remove spec.networkACL",
            ));
        }
        match snap.network_acl(acl) {
            None => {
                return Err(reject(
                    "spec.networkACL",
                    format!("NetworkACL {acl:?} does not exist"),
                ));
            }
            Some(a) if a.spec.vpc != spec.vpc => {
                return Err(reject(
                    "spec.networkACL",
                    format!(
                        "NetworkACL {acl:?} belongs to Vpc {:?}, not {:?}",
                        a.spec.vpc, spec.vpc
                    ),
                ));
            }
            Some(_) => {}
        }
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

/// L2-08: the five overlap checks, run whether or not a gateway is set.
fn overlaps(me: &str, vpc: &str, net: Ipv4Net, snap: &Snapshot) -> Verdict {
    let clash = |other: &str| {
        other
            .parse::<Ipv4Net>()
            .is_ok_and(|o| o.contains(&net.network()) || net.contains(&o.network()))
    };
    let connected = snap.connected_vpcs(vpc);
    for v in &connected {
        let how = if v == vpc {
            format!("in the same Vpc {vpc:?}")
        } else {
            format!("in Vpc {v:?}, reachable from {vpc:?} by VpcPeering or TransitGateway")
        };
        for s in snap.subnets.iter().filter(|s| &s.spec.vpc == v) {
            if clash(&s.spec.cidr) {
                return Err(reject(
                    "spec.cidr",
                    format!(
                        "{net} overlaps Subnet {:?} ({}) {how}",
                        s.metadata.name.as_deref().unwrap_or(""),
                        s.spec.cidr
                    ),
                ));
            }
        }
        for l in snap
            .l2networks
            .iter()
            .filter(|l| &l.spec.vpc == v && name(l) != me)
        {
            if let Some(c) = &l.spec.cidr
                && clash(c)
            {
                return Err(reject(
                    "spec.cidr",
                    format!("{net} overlaps L2Network {:?} ({c}) {how}", name(l)),
                ));
            }
        }
    }
    if let Some(pool) = snap.vpc(vpc).and_then(|v| v.spec.endpoint_pool.as_ref())
        && let Some(c) = pool.cidrs.iter().find(|c| clash(c))
    {
        {
            return Err(reject(
                "spec.cidr",
                format!("{net} overlaps the endpointPool {c} of Vpc {vpc:?}"),
            ));
        }
    }
    if let Some(c) = snap.service_cidrs.iter().find(|c| clash(c)) {
        return Err(reject(
            "spec.cidr",
            format!("{net} overlaps the cluster's Service CIDR {c}"),
        ));
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
    let gw_of = |l: &L2Network| -> Option<Ipv4Addr> {
        let g = l.spec.gateway.as_ref()?;
        let net = parse_cidr(l.spec.cidr.as_deref()?).ok()?;
        match &g.address {
            Some(a) => a.parse().ok(),
            None => Some(super::first_host(&net)),
        }
    };
    if let Some(gw) = gw_of(new)
        && gw_of(old) != Some(gw)
    {
        for nic in &snap.interfaces {
            let on_this = nic.spec.l2_network.as_deref() == Some(name(new));
            let held = nic
                .status
                .as_ref()
                .and_then(|s| s.address.split('/').next().map(str::to_owned))
                .is_some_and(|a| a == gw.to_string());
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
