//! Addresses from an L2Network's `cidr`: only the gateway's one address is reserved
//! (L2-17: no DNS resolver, no other infrastructure addresses), plus the network and
//! broadcast addresses, which no host can use.
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::alloc::{Pool, Refused};

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

/// The pool of a segment's `net`: its every address, the network and broadcast
/// addresses and the gateway reserved (so that asking for one of them is `Reserved`,
/// not `Outside`).
pub fn pool(net: Ipv4Net, gateway: Option<Ipv4Addr>) -> Pool<Ipv4Addr> {
    let mut p = Pool::new([(net.network(), net.broadcast())]);
    p.reserve(net.network()).reserve(net.broadcast());
    if let Some(g) = gateway {
        p.reserve(g);
    }
    p
}

/// The first free host address of `pool` (the one made by [`pool`] for `net`), or the
/// requested one if it is free; held either way.
pub fn allocate(
    pool: &mut Pool<Ipv4Addr>,
    net: Ipv4Net,
    requested: Option<Ipv4Addr>,
) -> Result<Ipv4Addr, IpamError> {
    match requested {
        Some(addr) => pool.claim(addr).map_err(|r| match r {
            Refused::Outside => IpamError::Outside { addr, cidr: net },
            Refused::Reserved => IpamError::Reserved { addr },
            Refused::Held => IpamError::Held { addr },
        }),
        None => pool.first_free().ok_or(IpamError::Exhausted { cidr: net }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_17_only_the_gateway_address_is_reserved() {
        let net: Ipv4Net = "10.7.0.0/29".parse().unwrap();
        let gw = Some("10.7.0.1".parse().unwrap());
        let mut p = pool(net, gw);
        let mut got = Vec::new();
        while let Ok(a) = allocate(&mut p, net, None) {
            got.push(a.to_string());
        }
        assert_eq!(
            got,
            ["10.7.0.2", "10.7.0.3", "10.7.0.4", "10.7.0.5", "10.7.0.6"]
        );
        assert_eq!(
            allocate(&mut p, net, None),
            Err(IpamError::Exhausted { cidr: net })
        );
        // Without a gateway, .1 is a host like any other.
        assert_eq!(
            allocate(&mut pool(net, None), net, None)
                .unwrap()
                .to_string(),
            "10.7.0.1"
        );
    }

    #[test]
    fn l2_17_requested_addresses_are_checked() {
        let net: Ipv4Net = "10.7.0.0/24".parse().unwrap();
        let gw = Some("10.7.0.1".parse().unwrap());
        let mut p = pool(net, gw);
        p.hold("10.7.0.9".parse().unwrap());
        for (asked, want) in [
            ("10.7.0.1", "Reserved"),
            ("10.7.0.0", "Reserved"),
            ("10.7.0.255", "Reserved"),
            ("10.7.0.9", "Held"),
            ("10.8.0.9", "Outside"),
        ] {
            let got = allocate(&mut p, net, Some(asked.parse().unwrap())).unwrap_err();
            assert!(format!("{got:?}").starts_with(want), "{asked}: {got:?}");
        }
        assert_eq!(
            allocate(&mut p, net, Some("10.7.0.77".parse().unwrap()))
                .unwrap()
                .to_string(),
            "10.7.0.77"
        );
        // A request does not move the first fit.
        assert_eq!(allocate(&mut p, net, None).unwrap().to_string(), "10.7.0.2");
    }
}
