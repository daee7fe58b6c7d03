//! BGPPeer (BGP-01): a router outside the cluster that every Node's BGP speaker peers
//! with. The reference's fields (`myASN`, `peerASN`, `peerAddress`, `peerPort`), and
//! Juneau's own `bfd` (on by default: the issue wants failover under a second, which
//! the hold timer alone never gives) and `holdTime` (always written out: BIRD's own
//! default is 240 s, FRR's 180 s, Cilium's, kube-ovn's and MetalLB's 90 s).
// kube-derive's `printcolumn(...)` lists repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The BGP port when `peerPort` is left out.
pub const DEFAULT_PORT: u32 = 179;
/// The hold time when `holdTime` is left out (s).
pub const DEFAULT_HOLD_TIME: u32 = 90;
/// BFD's transmit and receive interval when `bfd.intervalMs` is left out (ms).
pub const DEFAULT_BFD_INTERVAL_MS: u32 = 100;
/// BFD's detection multiplier when `bfd.multiplier` is left out.
pub const DEFAULT_BFD_MULTIPLIER: u32 = 3;

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "BGPPeer",
    printcolumn(name = "MYASN", type_ = "integer", json_path = ".spec.myASN"),
    printcolumn(name = "PEERASN", type_ = "integer", json_path = ".spec.peerASN"),
    printcolumn(name = "ADDRESS", type_ = "string", json_path = ".spec.peerAddress"),
    printcolumn(name = "PORT", type_ = "integer", json_path = ".spec.peerPort"),
    printcolumn(name = "BFD", type_ = "boolean", json_path = ".spec.bfd.enabled"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BGPPeerSpec {
    /// The Nodes' AS number, 1-4294967294.
    #[serde(rename = "myASN")]
    pub my_asn: u32,
    /// The peer's AS number, 1-4294967294.
    #[serde(rename = "peerASN")]
    pub peer_asn: u32,
    /// The peer's IPv4 address: a router outside the cluster, never a Node. Written
    /// as the user wrote it: admission reads the text to say what is wrong with it.
    pub peer_address: String,
    /// 179 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_port: Option<u32>,
    /// Seconds without a message before the session is declared down: 0 (no
    /// keepalives) or 3-65535; 90 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_time: Option<u32>,
    /// Bidirectional Forwarding Detection on the session: on (100 ms x 3) when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<Bfd>,
}

/// BFD of one BGPPeer's sessions.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Bfd {
    /// On unless set to false.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Transmit and receive interval, ms (10 or more); 100 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u32>,
    /// Packets missed before the session is down, 1-255; 3 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<u32>,
}

fn yes() -> bool {
    true
}

/// BFD as a session runs it: interval (ms) and multiplier, or `None` when off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BfdTimers {
    pub interval_ms: u32,
    pub multiplier: u32,
}

impl BGPPeerSpec {
    pub fn port(&self) -> u32 {
        self.peer_port.unwrap_or(DEFAULT_PORT)
    }
    pub fn hold(&self) -> u32 {
        self.hold_time.unwrap_or(DEFAULT_HOLD_TIME)
    }
    /// The session's BFD, defaults filled in; `None` when turned off.
    pub fn bfd_timers(&self) -> Option<BfdTimers> {
        let b = self.bfd.clone().unwrap_or(Bfd {
            enabled: true,
            ..Default::default()
        });
        b.enabled.then(|| BfdTimers {
            interval_ms: b.interval_ms.unwrap_or(DEFAULT_BFD_INTERVAL_MS),
            multiplier: b.multiplier.unwrap_or(DEFAULT_BFD_MULTIPLIER),
        })
    }
    /// The peer's address, once admission let it in.
    pub fn address(&self) -> Option<std::net::Ipv4Addr> {
        self.peer_address.parse().ok()
    }
}
