//! Nodes as network namespaces on one machine: an underlay bridge in its own namespace,
//! each Node joined to it by a veth with a fixed address, static underlay neighbours
//! between Nodes (the underlay carries nothing but the overlay). The Node's own devices
//! (VXLAN) are the daemon's to make (`node::daemon::bring_up`).
//!
//! On request ([`Topology::add_outside`]) an outside as well: an upstream router on the
//! underlay and an external client behind it, for traffic that enters and leaves the
//! cluster (ElasticIPs).
use std::net::Ipv4Addr;

use crate::{
    netns::Owned,
    scenario::{CLIENT, UPSTREAM},
};

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

/// The upstream router's address on the underlay, the Nodes' default gateway.
pub const UPSTREAM_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 254);
/// The upstream router's address on the external segment (198.51.100.0/24,
/// TEST-NET-2: never a real destination).
pub const EXTERNAL_GATEWAY: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
/// The external client's address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
/// Underlay addresses kept for ElasticIPs (10.99.0.100-199): the Nodes' datapath answers
/// ARP for them, so nobody gets a static neighbour for them and no Node is numbered
/// there.
pub const EIP_FIRST: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 100);
pub const EIP_LAST: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 199);

/// Nodes an outside leaves room for: Node 99 would be numbered 10.99.0.100.
const MAX_NODES_WITH_OUTSIDE: usize = 99;

pub struct NodeNs {
    pub name: String,
    pub ip: Ipv4Addr,
    pub ns: Owned,
}

/// The upstream router and the external client.
pub struct Outside {
    /// `<prefix>-upstream`: `ul0` (10.99.0.254/24) on the underlay bridge, `ext0`
    /// (198.51.100.1/24) to the client, forwarding between them; connected routes only.
    pub upstream: Owned,
    /// `<prefix>-client`: `eth0` (198.51.100.10/24), default route via the router.
    pub client: Owned,
}

/// Fields drop in order: Nodes first, then the outside, then the underlay.
pub struct Topology {
    pub nodes: Vec<NodeNs>,
    pub outside: Option<Outside>,
    pub underlay: Owned,
    /// The Nodes' underlay MTU, which the router's underlay port gets too.
    underlay_mtu: u32,
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
            // A Node forwards, as every Kubernetes Node does: its Pods' connections to
            // another Node's address leave through its stack (SVC-02).
            sysctl(&ns, "net.ipv4.ip_forward=1")?;
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
        Ok(Topology {
            nodes,
            outside: None,
            underlay,
            underlay_mtu,
        })
    }

    /// Adds the outside (`<prefix>-upstream`, `<prefix>-client`) and makes it every
    /// Node's way out: a default route via the router on `ul0`, and forwarding on (a Node
    /// forwards for the Pods that hold public addresses). The router and the Nodes find
    /// each other by ARP, never by static neighbours: the router must also learn by ARP
    /// the ElasticIPs the Nodes' datapath answers for.
    pub fn add_outside(&mut self, prefix: &str) -> Result<(), TopologyError> {
        if self.outside.is_some() {
            return Ok(());
        }
        if self.nodes.len() > MAX_NODES_WITH_OUTSIDE {
            return Err(TopologyError::Command(format!(
                "{} Nodes: with an outside at most {MAX_NODES_WITH_OUTSIDE} (10.99.0.100 on is kept for ElasticIPs)",
                self.nodes.len()
            )));
        }
        let mtu = self.underlay_mtu.to_string();
        // Made before anything is joined to them: a failure drops (deletes) both.
        let upstream = Owned::create(&format!("{prefix}-{UPSTREAM}"))?;
        let client = Owned::create(&format!("{prefix}-{CLIENT}"))?;
        ip(
            &upstream,
            &[
                "link",
                "add",
                UNDERLAY_DEV,
                "type",
                "veth",
                "peer",
                "name",
                "up0",
                "netns",
                self.underlay.name(),
            ],
        )?;
        ip(
            &self.underlay,
            &["link", "set", "up0", "mtu", &mtu, "master", "br0", "up"],
        )?;
        ip(&upstream, &["link", "set", UNDERLAY_DEV, "mtu", &mtu])?;
        ip(
            &upstream,
            &[
                "addr",
                "add",
                &format!("{UPSTREAM_IP}/24"),
                "dev",
                UNDERLAY_DEV,
            ],
        )?;
        ip(&upstream, &["link", "set", UNDERLAY_DEV, "up"])?;
        ip(
            &upstream,
            &[
                "link",
                "add",
                "ext0",
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                client.name(),
            ],
        )?;
        ip(
            &upstream,
            &[
                "addr",
                "add",
                &format!("{EXTERNAL_GATEWAY}/24"),
                "dev",
                "ext0",
            ],
        )?;
        ip(&upstream, &["link", "set", "ext0", "up"])?;
        sysctl(&upstream, "net.ipv4.ip_forward=1")?;
        ip(
            &client,
            &["addr", "add", &format!("{CLIENT_IP}/24"), "dev", "eth0"],
        )?;
        ip(&client, &["link", "set", "eth0", "up"])?;
        ip(
            &client,
            &[
                "route",
                "add",
                "default",
                "via",
                &EXTERNAL_GATEWAY.to_string(),
            ],
        )?;
        for n in &self.nodes {
            ip(
                &n.ns,
                &[
                    "route",
                    "replace",
                    "default",
                    "via",
                    &UPSTREAM_IP.to_string(),
                    "dev",
                    UNDERLAY_DEV,
                ],
            )?;
            sysctl(&n.ns, "net.ipv4.ip_forward=1")?;
        }
        self.outside = Some(Outside { upstream, client });
        Ok(())
    }
}

fn sysctl(ns: &Owned, setting: &str) -> Result<(), TopologyError> {
    ns.exec(&["sysctl", "-qw", setting])
        .map(|_| ())
        .map_err(TopologyError::Command)
}
