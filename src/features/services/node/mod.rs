//! What the Services of the cluster are to this Node's datapath, computed from the
//! cluster (pure): each ClusterIP port a consuming Vpc reaches, with the backends that
//! take new connections, and Maglev (`maglev`) to spread connections over them.
mod desired;
pub mod maglev;
#[cfg(test)]
mod tests;

pub use desired::{Sources, desired, provider_vni, sources};

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

/// A Service's frontend: its ClusterIP, port and IP protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FrontendKey {
    pub ip: Ipv4Addr,
    pub port: u16,
    /// IP protocol number (6 TCP, 17 UDP, 132 SCTP).
    pub proto: u8,
}

/// What a frontend sends new connections to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frontend {
    /// Backends that take new connections (ready, not terminating), by address and
    /// target port, sorted (the Maglev table depends only on the set).
    pub backends: Vec<(Ipv4Addr, u16)>,
    /// `sessionAffinity: ClientIP`: its timeout in seconds.
    pub affinity_s: Option<u32>,
}

/// Every frontend this Node serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceState {
    pub frontends: BTreeMap<FrontendKey, Frontend>,
    /// Backends outside every Subnet and L2Network: reached through the Node's stack,
    /// the source translated to this Node's Service source address (SVC-02).
    pub host_backends: BTreeSet<Ipv4Addr>,
    /// Backends that are Pods of a provider Vpc (`spec.service.provider`: the default
    /// Vpc's): a client of another Vpc reaches them with its source translated (SVC-02).
    pub provider_backends: BTreeSet<Ipv4Addr>,
}
