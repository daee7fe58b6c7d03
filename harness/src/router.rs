//! Router states for tests and benches: gateway segments that all route by one table
//! ("t") holding a connected route to each, and seeded neighbours, as the daemon would
//! compute them from a cluster (`juneau::features::router::gateway::desired`).
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::{
    features::router::gateway::{GatewaySegment, Neighbour, RouteSpec, RouterState},
    node::dataplane::Whole,
};
use juneau_common::gw::ROUTE_CONNECTED;

use crate::testrun::PortBed;

/// One gateway segment.
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    pub vni: u32,
    /// Its prefix, e.g. "10.0.1.0/24".
    pub cidr: &'static str,
    pub gw: [u8; 4],
    pub gw_mac: [u8; 6],
    pub mtu: u32,
}

impl Seg {
    /// The connected route to this segment.
    pub fn connected(&self) -> RouteSpec {
        RouteSpec {
            dst: self.cidr.parse().expect("a prefix"),
            kind: ROUTE_CONNECTED,
            vni: self.vni,
            gw_ip: self.gw.into(),
            gw_mac: self.gw_mac,
            mtu: self.mtu,
            nh_ip: Ipv4Addr::UNSPECIFIED,
        }
    }
}

/// A neighbour: (VNI, address, MAC, the VTEP of its Node).
pub type Nbr = (u32, [u8; 4], [u8; 6], Ipv4Addr);

/// `segs`, one table with a connected route to each, and `nbrs`.
pub fn state(segs: &[Seg], nbrs: &[Nbr]) -> RouterState {
    let mut s = RouterState::default();
    let routes = s.tables.entry("t".to_owned()).or_default();
    for g in segs {
        routes.insert(g.connected());
    }
    for g in segs {
        s.segments.insert(
            g.vni,
            GatewaySegment {
                gw_ip: g.gw.into(),
                gw_mac: g.gw_mac,
                mtu: g.mtu,
                prefix_len: g.connected().dst.prefix_len() as u32,
                table: "t".into(),
                // The beds' Vpc consumes Services (SVC-01); a bed clears it to check
                // a Vpc that does not.
                services: true,
                // And is the provider, whose Pods back them; a bed clears it to
                // check a client of another Vpc (SVC-02).
                provider: true,
                acl: 0,
            },
        );
    }
    for &(vni, ip, mac, vtep) in nbrs {
        s.neighbours
            .insert((vni, ip.into()), Neighbour { mac, vtep });
    }
    s
}

/// A Node's datapath on the ports of a [`PortBed`], for test runs of the router.
pub struct RouterBed {
    pub bed: PortBed,
    pub dp: Whole,
}

impl RouterBed {
    /// `frame` into port `port`'s `port_ingress`.
    pub fn send(&self, port: usize, frame: &[u8]) -> crate::testrun::Run {
        self.bed.send(self.dp.l2_port_program(), port, frame)
    }

    /// The drop counters that moved, by reason.
    pub fn drops(&self) -> BTreeMap<&'static str, u64> {
        self.dp
            .drops()
            .expect("drop counters")
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// One router counter (`ROUTED`, `ARP_REPLIES`, ...).
    pub fn stat(&self, name: &str) -> u64 {
        self.dp
            .gw_stats()
            .expect("router counters")
            .into_iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no router counter {name}"))
            .1
    }
}
