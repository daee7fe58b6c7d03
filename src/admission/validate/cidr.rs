//! IPv4 prefix parsing with the messages the rules need.
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// Parses an IPv4 prefix; `Err` says why, including the normalized form when host
/// bits are set (L2-07: there is no defaulter).
pub fn parse_cidr(s: &str) -> Result<Ipv4Net, String> {
    if s.contains(':') {
        return Err(format!("{s} is IPv6; L2Networks take IPv4 only"));
    }
    let net: Ipv4Net = s
        .parse()
        .map_err(|_| format!("{s} is not an IPv4 prefix (write a.b.c.d/len)"))?;
    if net.trunc() != net {
        return Err(format!("{s} has host bits set; use {}", net.trunc()));
    }
    Ok(net)
}

/// The first usable address (.1 of a /24).
pub fn first_host(net: &Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(net.network().to_bits() + 1)
}
