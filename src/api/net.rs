//! Addresses, prefixes and MACs as values: read once where an object enters (the
//! store, the API server's watch, the daemon's socket), so that nothing past the edge
//! parses one again. On the wire each stays the string it always was, with `""` for
//! one not set yet, so the objects' JSON and the CRDs' schemas do not change.
//!
//! A field is `Option<T>` with `#[serde(default, with = "or_empty")]` and
//! `#[schemars(with = "String")]`. A value that is no address (an object edited by
//! hand) is read as unset and logged with what it was: one bad object must not stall
//! a watch of all of them.
use std::{fmt, net::Ipv4Addr, str::FromStr};

use ipnet::Ipv4Net;

use serde::{Deserialize, Serialize};

/// Parses an IPv4 prefix a user wrote (a segment's `cidr`, a route's `dst`, a rule's
/// peer); `Err` says why, including the normalized form when host bits are set (L2-07:
/// there is no defaulter). The user-written fields stay strings on the wire and in
/// the types: admission must see the text to say what is wrong with it, and reads it
/// with this; everything past admission reads it through the kinds' accessors
/// (`Subnet::prefix`, `L2Network::prefix`, `L2Network::gateway_address`), which use
/// this too.
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

/// A MAC address, written `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::format_mac(&self.0))
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a MAC address (aa:bb:cc:dd:ee:ff)")]
pub struct BadMac(pub String);

impl FromStr for Mac {
    type Err = BadMac;
    fn from_str(s: &str) -> Result<Self, BadMac> {
        crate::parse_mac(s)
            .map(Mac)
            .ok_or_else(|| BadMac(s.to_owned()))
    }
}

impl Serialize for Mac {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mac {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// How an optional value reads in a line of output: `""` when unset, as on the wire.
pub fn shown<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map(T::to_string).unwrap_or_default()
}

/// `Option<T>` written as `T`'s string, or `""` for `None`.
pub mod or_empty {
    use std::{fmt::Display, str::FromStr};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer, T: Display>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(v),
            None => s.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: FromStr>(d: D) -> Result<Option<T>, D::Error> {
        let s = Option::<String>::deserialize(d)?.unwrap_or_default();
        if s.is_empty() {
            return Ok(None);
        }
        match s.parse() {
            Ok(v) => Ok(Some(v)),
            Err(_) => {
                tracing::warn!(
                    value = s,
                    "an address field holds no address; read as unset"
                );
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use ipnet::Ipv4Net;
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
    struct Status {
        #[serde(default, with = "or_empty")]
        address: Option<Ipv4Net>,
        #[serde(default, with = "or_empty")]
        gateway: Option<Ipv4Addr>,
        #[serde(default, with = "or_empty")]
        mac: Option<Mac>,
    }

    #[test]
    fn values_are_written_as_the_strings_they_replace() {
        let st = Status {
            address: Some("10.0.0.5/24".parse().unwrap()),
            gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
            mac: Some(Mac([0x02, 0x4a, 0x4e, 0, 0, 0x2a])),
        };
        let json = serde_json::to_value(&st).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"address": "10.0.0.5/24", "gateway": "10.0.0.1", "mac": "02:4a:4e:00:00:2a"})
        );
        assert_eq!(serde_json::from_value::<Status>(json).unwrap(), st);
        // Unset: "" both ways, and a missing or null field reads as unset.
        let none = serde_json::to_value(Status::default()).unwrap();
        assert_eq!(
            none,
            serde_json::json!({"address": "", "gateway": "", "mac": ""})
        );
        assert_eq!(
            serde_json::from_value::<Status>(none).unwrap(),
            Status::default()
        );
        let missing: Status = serde_json::from_value(serde_json::json!({"gateway": null})).unwrap();
        assert_eq!(missing, Status::default());
    }

    #[test]
    fn a_value_that_is_no_address_reads_as_unset() {
        let st: Status = serde_json::from_value(
            serde_json::json!({"address": "10.0.0.5", "gateway": "ten", "mac": "02:4a"}),
        )
        .unwrap();
        // "10.0.0.5" has no prefix: not an interface address.
        assert_eq!(st, Status::default());
    }

    #[test]
    fn macs_parse_in_any_case_and_print_in_lower() {
        let m: Mac = "02:4A:4E:00:00:2A".parse().unwrap();
        assert_eq!(m.to_string(), "02:4a:4e:00:00:2a");
        assert_eq!(
            "02:4a".parse::<Mac>().unwrap_err().to_string(),
            "\"02:4a\" is not a MAC address (aa:bb:cc:dd:ee:ff)"
        );
    }
}
