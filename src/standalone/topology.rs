//! Nodes as network namespaces on one machine: an underlay bridge in its own namespace,
//! each Node joined to it by a veth with a fixed address, static underlay neighbours
//! (the underlay carries nothing but the overlay). The Node's own devices (VXLAN) are
//! the daemon's to make (`node::daemon::bring_up`).
use std::net::Ipv4Addr;

use crate::netns::Owned;

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("namespace: {0}")]
    Netns(#[from] std::io::Error),
    #[error("{0}")]
    Command(String),
    #[error(transparent)]
    Link(#[from] crate::node::netlink::NetlinkError),
}

/// Name of the VXLAN device in every Node.
pub use crate::node::daemon::VXLAN_DEV;
/// Name of the underlay NIC in every Node.
pub const UNDERLAY_DEV: &str = "ul0";

/// Underlay address of Node `n`.
pub fn node_ip(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 0, 1 + n as u8)
}

/// Underlay MAC of Node `n`.
pub fn node_mac(n: usize) -> String {
    format!("02:00:00:99:00:{:02x}", 1 + n as u8)
}

pub struct NodeNs {
    pub name: String,
    pub ip: Ipv4Addr,
    pub ns: Owned,
}

/// Fields drop in order: Nodes first, then the underlay.
pub struct Topology {
    pub nodes: Vec<NodeNs>,
    pub underlay: Owned,
}

fn ip(ns: &Owned, args: &[&str]) -> Result<(), TopologyError> {
    let mut argv = vec!["ip"];
    argv.extend_from_slice(args);
    ns.exec(&argv).map(|_| ()).map_err(TopologyError::Command)
}

impl Topology {
    /// Creates the underlay and one namespace per Node name (`<prefix>-<node>`).
    pub fn new(prefix: &str, names: &[String]) -> Result<Topology, TopologyError> {
        Self::with_mtu(prefix, names, 1500)
    }

    /// As [`Topology::new`] with an underlay MTU (the VXLAN devices get 50 bytes less).
    pub fn with_mtu(
        prefix: &str,
        names: &[String],
        underlay_mtu: u32,
    ) -> Result<Topology, TopologyError> {
        let underlay = Owned::create(&format!("{prefix}-underlay"))?;
        ip(&underlay, &["link", "add", "br0", "type", "bridge"])?;
        ip(&underlay, &["link", "set", "br0", "up"])?;
        let mut nodes = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let ns = Owned::create(&format!("{prefix}-{name}"))?;
            let port = format!("n{i}");
            ip(
                &ns,
                &[
                    "link",
                    "add",
                    UNDERLAY_DEV,
                    "address",
                    &node_mac(i),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &port,
                    "netns",
                    underlay.name(),
                ],
            )?;
            ip(
                &underlay,
                &[
                    "link",
                    "set",
                    &port,
                    "mtu",
                    &underlay_mtu.to_string(),
                    "master",
                    "br0",
                    "up",
                ],
            )?;
            ip(
                &ns,
                &[
                    "link",
                    "set",
                    UNDERLAY_DEV,
                    "mtu",
                    &underlay_mtu.to_string(),
                ],
            )?;
            ip(
                &ns,
                &[
                    "addr",
                    "add",
                    &format!("{}/24", node_ip(i)),
                    "dev",
                    UNDERLAY_DEV,
                ],
            )?;
            ip(&ns, &["link", "set", UNDERLAY_DEV, "up"])?;
            for j in (0..names.len()).filter(|j| *j != i) {
                ip(
                    &ns,
                    &[
                        "neigh",
                        "replace",
                        &node_ip(j).to_string(),
                        "lladdr",
                        &node_mac(j),
                        "dev",
                        UNDERLAY_DEV,
                        "nud",
                        "permanent",
                    ],
                )?;
            }
            nodes.push(NodeNs {
                name: name.clone(),
                ip: node_ip(i),
                ns,
            });
        }
        Ok(Topology { nodes, underlay })
    }
}
