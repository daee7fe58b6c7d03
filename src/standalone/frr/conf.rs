//! The upstream router of the standalone bed: FRR's `zebra.conf`, `bfdd.conf` and
//! `bgpd.conf`, rendered from plain data (plan section 5).
//!
//! Pure: no file is written here, so the golden test and the bed read the same text.
//! Every statement was checked against FRR 8.4.4 itself (the daemons started on these
//! files, `show running-config` holds each line back and the logs reject none; FRR
//! leaves out a value equal to its default, so `detect-multiplier 3` shows only when it
//! is not 3, and bgpd adds `neighbor NODES bfd`, implied by the profile): see `docs/bgp-bed/frr.md`
//! (the check is described there).
use std::{fmt::Write as _, net::Ipv4Addr};

/// The peer-group every Node is a member of: one place for the session options, so a
/// Node added or removed is one `neighbor <address> peer-group` line.
pub const PEER_GROUP: &str = "NODES";
/// The BFD profile bgpd names; bfdd holds its timers.
pub const BFD_PROFILE: &str = "juneau";
/// The route-map that takes every route a Node announces.
pub const ROUTE_MAP_IN: &str = "NODES-IN";
/// The route-map that announces nothing: the upstream is a sink, a Node learns nothing
/// from it (BIRD imports none anyway, `import none`).
pub const ROUTE_MAP_OUT: &str = "NOTHING";
/// ECMP width: three Nodes in the bed, room for more.
pub const MAXIMUM_PATHS: u8 = 8;

/// What the upstream router is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// `hostname` in `zebra.conf`: what vtysh prints in its prompt.
    pub hostname: String,
    /// The BGPPeer's `peerASN`.
    pub local_as: u32,
    /// The upstream's own address (the address bgpd listens on).
    pub router_id: Ipv4Addr,
    /// One per Node, in the order they are written.
    pub neighbors: Vec<Neighbor>,
    /// `None`: no BFD, the hold timer alone detects a lost Node.
    pub bfd: Option<BfdProfile>,
    pub timers: Timers,
    /// `true`: `bgp graceful-restart` (restarting and helper), the mode BIRD's
    /// `graceful restart on` needs from its peer; `false`: `bgp graceful-restart-disable`
    /// (FRR's default is helper-only, which would still keep a restarting Node's routes).
    pub graceful_restart: bool,
}

/// One Node's BGP speaker as the upstream sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbor {
    /// The Node's session source (its InternalIP).
    pub address: Ipv4Addr,
    /// The BGPPeer's `myASN`.
    pub remote_as: u32,
}

/// BFD timers; FRR takes the same value for receive and transmit, as BIRD's side does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BfdProfile {
    pub interval_ms: u32,
    pub multiplier: u8,
}

/// BGP timers in seconds, always written: FRR's defaults (60/180) are not the plan's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    pub keepalive: u16,
    pub hold: u16,
    /// How long bgpd waits before trying a dead Node again (default 120 s).
    pub connect_retry: u16,
}

impl Default for Timers {
    /// The BGPPeer's `holdTime: 90` with a keepalive of a third, retry 5 s as BIRD's side.
    fn default() -> Self {
        Timers {
            keepalive: 30,
            hold: 90,
            connect_retry: 5,
        }
    }
}

/// The first lines of every file. Each daemon takes `hostname` from its own file and
/// falls back to the machine's name (vtysh then shows two `hostname` lines, and bgpd
/// sends the machine's name in its hostname capability), so all three carry it.
fn header(file: &str, up: &Upstream) -> String {
    format!(
        "! {file}: rendered for the upstream router; rewritten every run.\nhostname {}\n",
        up.hostname
    )
}

/// `zebra.conf`: only the hostname. Zebra's defaults (kernel nexthop groups, ECMP as
/// the kernel allows) are what the bed wants, and the namespace's sysctls are set
/// before zebra starts, not by zebra.
pub fn zebra_conf(up: &Upstream) -> String {
    header("zebra.conf", up)
}

/// `bfdd.conf`: the profile bgpd names, or an empty `bfd` node when BFD is off (bfdd
/// still runs: bgpd's `bfd` commands need it and an idle bfdd costs nothing).
pub fn bfdd_conf(up: &Upstream) -> String {
    let mut s = header("bfdd.conf", up);
    s.push_str("bfd\n");
    if let Some(b) = up.bfd {
        // writeln! to a String cannot fail.
        let _ = writeln!(s, " profile {BFD_PROFILE}");
        let _ = writeln!(s, "  detect-multiplier {}", b.multiplier);
        let _ = writeln!(s, "  receive-interval {}", b.interval_ms);
        let _ = writeln!(s, "  transmit-interval {}", b.interval_ms);
        s.push_str(" !\n");
    }
    s.push_str("!\n");
    s
}

/// `bgpd.conf`: one eBGP session per Node through the peer-group, every route taken,
/// nothing announced, up to [`MAXIMUM_PATHS`] Nodes installed as ECMP next hops.
///
/// When all Nodes share an AS (the usual case: one BGPPeer's `myASN`), `remote-as` is
/// the peer-group's; when they differ, the group has none and each member carries its
/// own before joining (the form FRR 8.4 took in the bed), and `multipath-relax` lets
/// paths of different AS_PATHs share the ECMP set.
pub fn bgpd_conf(up: &Upstream) -> String {
    let g = PEER_GROUP;
    let shared_as = shared_remote_as(&up.neighbors);
    let mut s = header("bgpd.conf", up);
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    // The route-maps come first (the plan's sample had them last). A neighbor's
    // `route-map` names one that does not exist yet leaves the neighbor without a map
    // until the route-map delay timer (5 s) runs, and bgpd denies every UPDATE
    // meanwhile: the Nodes' first UPDATEs were dropped and the routes came only with
    // the ROUTE-REFRESH bgpd sent after the timer, 8 s after start instead of 1 s.
    line(format!("route-map {ROUTE_MAP_IN} permit 10"));
    line(format!("route-map {ROUTE_MAP_OUT} deny 10"));
    line("!".into());
    line(format!("router bgp {}", up.local_as));
    line(format!(" bgp router-id {}", up.router_id));
    // FRR 8 drops eBGP routes without a policy (RFC 8212); the route-maps above are the
    // policy, this keeps a missing one from silently dropping everything.
    line(" no bgp ebgp-requires-policy".into());
    line(" no bgp default ipv4-unicast".into());
    line(if up.graceful_restart {
        " bgp graceful-restart".into()
    } else {
        " bgp graceful-restart-disable".into()
    });
    line(" bgp bestpath as-path multipath-relax".into());
    line(format!(" neighbor {g} peer-group"));
    if let Some(asn) = shared_as {
        line(format!(" neighbor {g} remote-as {asn}"));
    }
    line(format!(
        " neighbor {g} timers {} {}",
        up.timers.keepalive, up.timers.hold
    ));
    line(format!(
        " neighbor {g} timers connect {}",
        up.timers.connect_retry
    ));
    if up.bfd.is_some() {
        // No `bfd check-control-plane-failure` (the plan's sample had it): FRR 8.4
        // then ignores every BFD down of a session whose peer negotiated GR (NSF mode
        // is set at Established, not only during a restart) when the peer's C bit is
        // clear, and BIRD's always is: a lost Node stayed until the hold timer (64.6 s
        // measured). Without it a speaker restart still keeps its routes: the TCP
        // close reaches bgpd first (GR helper, stale kept), the BFD down 0.3 s later
        // finds the session Idle and changes nothing (docs/bgp-bed/frr.md).
        line(format!(" neighbor {g} bfd profile {BFD_PROFILE}"));
    }
    for n in &up.neighbors {
        if shared_as.is_none() {
            line(format!(" neighbor {} remote-as {}", n.address, n.remote_as));
        }
        line(format!(" neighbor {} peer-group {g}", n.address));
    }
    line(" address-family ipv4 unicast".into());
    line(format!("  neighbor {g} activate"));
    line(format!("  neighbor {g} route-map {ROUTE_MAP_IN} in"));
    line(format!("  neighbor {g} route-map {ROUTE_MAP_OUT} out"));
    line(format!("  maximum-paths {MAXIMUM_PATHS}"));
    line(" exit-address-family".into());
    s
}

/// The one AS every Node uses, if they agree (an empty list agrees on nothing: the
/// group then has no `remote-as` and no member needs one).
fn shared_remote_as(neighbors: &[Neighbor]) -> Option<u32> {
    let first = neighbors.first()?.remote_as;
    neighbors
        .iter()
        .all(|n| n.remote_as == first)
        .then_some(first)
}

#[cfg(test)]
#[path = "conf_tests.rs"]
mod tests;
