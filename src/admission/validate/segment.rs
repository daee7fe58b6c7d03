//! What every segment kind (Subnet, L2Network) is checked for alike: its CIDR's size,
//! the five overlap checks of L2-08, and a NetworkACL of its own Vpc.
use ipnet::Ipv4Net;

use super::{Snapshot, Verdict, reject};
use crate::api::net::parse_cidr;

/// The segment being checked, so that it does not clash with itself.
#[derive(Clone, Copy)]
pub enum Segment<'a> {
    Subnet(&'a str),
    L2Network(&'a str),
}

/// `spec.cidr`: IPv4, /16 to /28.
pub fn cidr_of(cidr: &str) -> Result<Ipv4Net, super::Rejection> {
    let net = parse_cidr(cidr).map_err(|m| reject("spec.cidr", m))?;
    if !(16..=28).contains(&net.prefix_len()) {
        return Err(reject(
            "spec.cidr",
            format!("/{} is outside /16 to /28", net.prefix_len()),
        ));
    }
    Ok(net)
}

/// L2-08: the five overlap checks: Subnets and L2Networks of the same Vpc, and of the
/// Vpcs reachable from it by VpcPeering or TransitGateway; the Vpc's endpointPool; the
/// cluster's Service CIDR.
pub fn overlaps(me: Segment<'_>, vpc: &str, net: Ipv4Net, snap: &Snapshot) -> Verdict {
    let clash = |other: &str| {
        other
            .parse::<Ipv4Net>()
            .is_ok_and(|o| o.contains(&net.network()) || net.contains(&o.network()))
    };
    let (me_subnet, me_l2) = match me {
        Segment::Subnet(n) => (Some(n), None),
        Segment::L2Network(n) => (None, Some(n)),
    };
    let connected = snap.connected_vpcs(vpc);
    for v in &connected {
        let how = if v == vpc {
            format!("in the same Vpc {vpc:?}")
        } else {
            format!("in Vpc {v:?}, reachable from {vpc:?} by VpcPeering or TransitGateway")
        };
        for s in snap
            .subnets
            .iter()
            .filter(|s| &s.spec.vpc == v && s.metadata.name.as_deref() != me_subnet)
        {
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
            .filter(|l| &l.spec.vpc == v && l.metadata.name.as_deref() != me_l2)
        {
            if let Some(c) = &l.spec.cidr
                && clash(c)
            {
                return Err(reject(
                    "spec.cidr",
                    format!(
                        "{net} overlaps L2Network {:?} ({c}) {how}",
                        l.metadata.name.as_deref().unwrap_or("")
                    ),
                ));
            }
        }
    }
    if let Some(pool) = snap.vpc(vpc).and_then(|v| v.spec.endpoint_pool.as_ref())
        && let Some(c) = pool.cidrs.iter().find(|c| clash(c))
    {
        return Err(reject(
            "spec.cidr",
            format!("{net} overlaps the endpointPool {c} of Vpc {vpc:?}"),
        ));
    }
    if let Some(c) = snap.service_cidrs.iter().find(|c| clash(&c.to_string())) {
        return Err(reject(
            "spec.cidr",
            format!("{net} overlaps the cluster's Service CIDR {c}"),
        ));
    }
    Ok(())
}

/// `spec.networkACL`: an existing NetworkACL of the segment's own Vpc.
pub fn acl_of_vpc(acl: &str, vpc: &str, snap: &Snapshot) -> Verdict {
    match snap.network_acl(acl) {
        None => Err(reject(
            "spec.networkACL",
            format!("NetworkACL {acl:?} does not exist"),
        )),
        Some(a) if a.spec.vpc != vpc => Err(reject(
            "spec.networkACL",
            format!(
                "NetworkACL {acl:?} belongs to Vpc {:?}, not {vpc:?}",
                a.spec.vpc
            ),
        )),
        Some(_) => Ok(()),
    }
}
