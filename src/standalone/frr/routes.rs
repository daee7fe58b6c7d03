//! What the upstream router says, from vtysh's JSON (FRR 8.4): the next hops zebra
//! installed for a prefix, and the BGP sessions.
//!
//! JSON, not `ip route`: zebra installs kernel nexthop groups, so `ip route` prints
//! `nhid N` and the group's members sit in `ip nexthop`; and the JSON says which next
//! hops zebra itself counts as active and in the FIB. Fields FRR leaves out when false
//! (`active`, `fib`, `installed`, `selected`) default to false; fields not read here
//! are ignored, so a newer FRR that adds some still parses.
use std::{collections::BTreeMap, fmt, net::Ipv4Addr};

use serde::Deserialize;

/// Why a vtysh answer could not be read.
#[derive(Debug)]
pub enum ParseError {
    /// Not the JSON FRR 8.4 prints for this command (vtysh prints `% ...` text when a
    /// daemon is down or the command is unknown).
    Json(serde_json::Error),
    /// A next hop's `ip` is not an IPv4 address.
    Address(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Json(e) => write!(f, "not FRR's JSON: {e}"),
            ParseError::Address(a) => write!(f, "next hop {a:?} is not an IPv4 address"),
        }
    }
}

impl std::error::Error for ParseError {}

impl From<serde_json::Error> for ParseError {
    fn from(e: serde_json::Error) -> Self {
        ParseError::Json(e)
    }
}

/// One next hop of a route, as zebra holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextHop {
    /// `None` for a next hop that is an interface only (a connected route).
    pub address: Option<Ipv4Addr>,
    pub interface: Option<String>,
    /// Zebra resolved it and uses it.
    pub active: bool,
    /// It is in the kernel's table: what forwards packets.
    pub fib: bool,
}

/// One route entry of `show ip route <prefix> json` (a prefix may have one per protocol).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub prefix: String,
    pub protocol: String,
    /// Zebra's best of the prefix's entries.
    pub selected: bool,
    /// Written to the kernel.
    pub installed: bool,
    pub next_hops: Vec<NextHop>,
}

#[derive(Deserialize)]
struct RawRoute {
    prefix: String,
    protocol: String,
    #[serde(default)]
    selected: bool,
    #[serde(default)]
    installed: bool,
    #[serde(default)]
    nexthops: Vec<RawNextHop>,
}

#[derive(Deserialize)]
struct RawNextHop {
    ip: Option<String>,
    #[serde(rename = "interfaceName")]
    interface_name: Option<String>,
    #[serde(default)]
    active: bool,
    #[serde(default)]
    fib: bool,
}

/// Every entry of `show ip route <prefix> json`, keyed as FRR keys them (by prefix; a
/// prefix without a route prints `{}`, which is no entry).
pub fn parse_routes(json: &str) -> Result<Vec<Route>, ParseError> {
    let raw: BTreeMap<String, Vec<RawRoute>> = serde_json::from_str(json)?;
    let mut routes = Vec::new();
    for r in raw.into_values().flatten() {
        let next_hops = r
            .nexthops
            .into_iter()
            .map(|n| {
                let address = match n.ip {
                    None => None,
                    Some(ip) => Some(ip.parse().map_err(|_| ParseError::Address(ip))?),
                };
                Ok(NextHop {
                    address,
                    interface: n.interface_name,
                    active: n.active,
                    fib: n.fib,
                })
            })
            .collect::<Result<_, ParseError>>()?;
        routes.push(Route {
            prefix: r.prefix,
            protocol: r.protocol,
            selected: r.selected,
            installed: r.installed,
            next_hops,
        });
    }
    Ok(routes)
}

/// The next hops of `prefix`'s installed entry (the one in the kernel), each with its
/// flags; empty when the prefix has no installed route. A test of ECMP counts those
/// with `fib`.
pub fn installed_next_hops(json: &str, prefix: &str) -> Result<Vec<NextHop>, ParseError> {
    Ok(parse_routes(json)?
        .into_iter()
        .find(|r| r.prefix == prefix && r.installed)
        .map(|r| r.next_hops)
        .unwrap_or_default())
}

/// One BGP neighbor of `show bgp summary json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The address family block it was listed in (`ipv4Unicast`).
    pub family: String,
    /// The neighbor as FRR names it: an address, or an interface for unnumbered ones.
    pub neighbor: String,
    pub remote_as: u32,
    /// FRR's FSM state: `Established`, `Idle`, `Connect`, `Active`, `OpenSent`, ...
    pub state: String,
    /// Time in the current state (up for an Established session, down otherwise), as
    /// FRR prints it (`00:01:02`, `1d02h03m`, ...), and in milliseconds.
    pub uptime: String,
    pub uptime_ms: u64,
    /// Prefixes received and accepted; FRR writes it in every state (0 when down).
    pub pfx_rcd: u64,
}

impl Session {
    pub fn established(&self) -> bool {
        self.state == "Established"
    }
}

#[derive(Deserialize)]
struct RawFamily {
    #[serde(default)]
    peers: BTreeMap<String, RawPeer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPeer {
    remote_as: u32,
    state: String,
    #[serde(default)]
    peer_uptime: String,
    #[serde(default)]
    peer_uptime_msec: u64,
    #[serde(default)]
    pfx_rcd: u64,
}

/// Every neighbor of every address family in `show bgp summary json`, sorted by
/// family, then by the neighbor's text (not numerically). A bgpd without sessions prints
/// `{}`: no session. Top-level keys that are not a family block (none in 8.4) are
/// skipped rather than refused.
pub fn parse_bgp_summary(json: &str) -> Result<Vec<Session>, ParseError> {
    let top: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json)?;
    let mut sessions = Vec::new();
    for (family, block) in top {
        if !block.get("peers").is_some_and(serde_json::Value::is_object) {
            continue;
        }
        let block: RawFamily = serde_json::from_value(block)?;
        for (neighbor, p) in block.peers {
            sessions.push(Session {
                family: family.clone(),
                neighbor,
                remote_as: p.remote_as,
                state: p.state,
                uptime: p.peer_uptime,
                uptime_ms: p.peer_uptime_msec,
                pfx_rcd: p.pfx_rcd,
            });
        }
    }
    Ok(sessions)
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
