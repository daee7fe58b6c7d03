//! Addresses from an L2Network's `cidr`: only the gateway's one address is reserved
//! (L2-17: no DNS resolver, no other infrastructure addresses), plus the network and
//! broadcast addresses, which no host can use.
use std::{collections::BTreeSet, net::Ipv4Addr};

use ipnet::Ipv4Net;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IpamError {
    #[error("{cidr} has no free address left")]
    Exhausted { cidr: Ipv4Net },
    #[error("requested address {addr} is outside {cidr}")]
    Outside { addr: Ipv4Addr, cidr: Ipv4Net },
    #[error("requested address {addr} is already held")]
    Held { addr: Ipv4Addr },
    #[error("requested address {addr} is reserved (network, broadcast or gateway)")]
    Reserved { addr: Ipv4Addr },
}

/// The first free host address of `net`, or the requested one if it is free.
pub fn allocate(
    net: Ipv4Net,
    gateway: Option<Ipv4Addr>,
    held: &BTreeSet<Ipv4Addr>,
    requested: Option<Ipv4Addr>,
) -> Result<Ipv4Addr, IpamError> {
    allocate_from(net, gateway, held, requested, &mut net.network())
}

/// [`allocate`] for a pass that only adds to `held`: no address below `cursor` is free,
/// so the search starts there and moves it on (first-fit stays first-fit, and a pass
/// over n NICs costs O(n) instead of O(n^2)).
pub fn allocate_from(
    net: Ipv4Net,
    gateway: Option<Ipv4Addr>,
    held: &BTreeSet<Ipv4Addr>,
    requested: Option<Ipv4Addr>,
    cursor: &mut Ipv4Addr,
) -> Result<Ipv4Addr, IpamError> {
    let reserved = |a: Ipv4Addr| a == net.network() || a == net.broadcast() || Some(a) == gateway;
    if let Some(addr) = requested {
        if !net.contains(&addr) {
            return Err(IpamError::Outside { addr, cidr: net });
        }
        if reserved(addr) {
            return Err(IpamError::Reserved { addr });
        }
        if held.contains(&addr) {
            return Err(IpamError::Held { addr });
        }
        return Ok(addr);
    }
    let found = net
        .hosts()
        .skip_while(|a| a < cursor)
        .find(|a| !reserved(*a) && !held.contains(a))
        .ok_or(IpamError::Exhausted { cidr: net })?;
    *cursor = found;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_17_only_the_gateway_address_is_reserved() {
        let net: Ipv4Net = "10.7.0.0/29".parse().unwrap();
        let gw = Some("10.7.0.1".parse().unwrap());
        let mut held = BTreeSet::new();
        let mut got = Vec::new();
        while let Ok(a) = allocate(net, gw, &held, None) {
            held.insert(a);
            got.push(a.to_string());
        }
        assert_eq!(
            got,
            ["10.7.0.2", "10.7.0.3", "10.7.0.4", "10.7.0.5", "10.7.0.6"]
        );
        assert_eq!(
            allocate(net, gw, &held, None),
            Err(IpamError::Exhausted { cidr: net })
        );
        // Without a gateway, .1 is a host like any other.
        assert_eq!(
            allocate(net, None, &BTreeSet::new(), None)
                .unwrap()
                .to_string(),
            "10.7.0.1"
        );
    }

    #[test]
    fn l2_17_requested_addresses_are_checked() {
        let net: Ipv4Net = "10.7.0.0/24".parse().unwrap();
        let gw = Some("10.7.0.1".parse().unwrap());
        let held: BTreeSet<Ipv4Addr> = ["10.7.0.9".parse().unwrap()].into();
        assert!(matches!(
            allocate(net, gw, &held, Some("10.7.0.1".parse().unwrap())),
            Err(IpamError::Reserved { .. })
        ));
        assert!(matches!(
            allocate(net, gw, &held, Some("10.7.0.9".parse().unwrap())),
            Err(IpamError::Held { .. })
        ));
        assert!(matches!(
            allocate(net, gw, &held, Some("10.8.0.9".parse().unwrap())),
            Err(IpamError::Outside { .. })
        ));
        assert_eq!(
            allocate(net, gw, &held, Some("10.7.0.77".parse().unwrap()))
                .unwrap()
                .to_string(),
            "10.7.0.77"
        );
    }
}
