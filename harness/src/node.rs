//! Node and Pod namespaces plumbed by the daemon's own code (`juneau::node`), and a
//! Cluster of Nodes joined by an underlay bridge with a VXLAN overlay.
use std::net::Ipv4Addr;

use juneau::{
    node::{
        daemon::{self, NodeSetup},
        dataplane::{PortKind, PortSpec, Whole},
        veth::{self, VethSpec},
    },
    standalone::topology,
};

use crate::{Netns, frames::fixtures};

pub struct Pod {
    pub ns: Netns,
    /// Interface inside the Pod.
    pub ifname: String,
    /// Host-side veth in the Node.
    pub host_ifname: String,
    pub host_ifindex: u32,
    pub mac: [u8; 6],
    pub vni: u32,
}

/// What a Pod NIC looks like, beyond its index.
#[derive(Clone, Copy, Debug)]
pub struct PodOptions {
    pub vni: u32,
    /// Segment MTU, set on both veth ends and checked by the datapath (0: kernel default).
    pub mtu: u32,
    /// The port carries PORT_SG: the NIC's SecurityGroups are looked up by (VNI,
    /// address) in `jn_pol_nic` (written by the caller).
    pub security_groups: bool,
    /// A Subnet NIC holding this address (`PortKind::Subnet`, routed: its veth runs the
    /// router itself); `None` for a port of an L2Network segment (switched).
    pub subnet_ip: Option<[u8; 4]>,
}

impl PodOptions {
    pub const fn vni(vni: u32) -> Self {
        Self {
            vni,
            mtu: 0,
            security_groups: false,
            subnet_ip: None,
        }
    }

    pub const fn mtu(self, mtu: u32) -> Self {
        Self { mtu, ..self }
    }

    /// A Subnet NIC of address `ip` on segment `vni`.
    pub const fn subnet(self, ip: [u8; 4]) -> Self {
        Self {
            subnet_ip: Some(ip),
            ..self
        }
    }
}

/// Fields drop in declaration order: the datapath detaches before the Pods and the
/// Node namespace go.
pub struct Node {
    /// The datapath with its writers, as the daemon's features hold them.
    pub dataplane: Whole,
    pub pods: Vec<Pod>,
    pub ns: Netns,
    /// The Node's underlay address, when it has an overlay.
    pub ip: Option<Ipv4Addr>,
}

impl Node {
    /// The drop reasons this Node's datapath counted at least once, with their counts
    /// (a benchmark's proof that its path dropped nothing).
    pub fn dropped(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.dataplane
            .drops()
            .expect("read the drop counters")
            .into_iter()
            .filter(|d| d.1 > 0)
            .collect()
    }

    pub fn new() -> Node {
        let ns = Netns::new("node");
        Node {
            dataplane: Whole::load(None).expect("load datapath"),
            pods: Vec::new(),
            ns,
            ip: None,
        }
    }

    /// Adds Pod `i` (MAC `fixtures::pod_mac(i)`) on segment `vni`, plumbed and attached
    /// as the daemon does. Returns its index in `pods`.
    pub fn add_pod(&mut self, i: u8, vni: u32) -> usize {
        self.add_pod_with(i, PodOptions::vni(vni))
    }

    pub fn add_pod_with(&mut self, i: u8, opts: PodOptions) -> usize {
        self.plumb(i, opts, None)
    }

    /// Adds Pod `i` holding ElasticIP `eip` of network `vni` on its eth0, as the daemon
    /// plumbs a direct NIC: the host end has the network's gateway MAC, the port is
    /// held to the Pod's MAC and the ElasticIP.
    pub fn add_eip_pod(&mut self, i: u8, vni: u32, eip: [u8; 4]) -> usize {
        self.plumb(i, PodOptions::vni(vni), Some(eip))
    }

    fn plumb(&mut self, i: u8, opts: PodOptions, eip: Option<[u8; 4]>) -> usize {
        let ns = Netns::new("pod");
        let spec = VethSpec {
            host_name: format!("jp{i}"),
            host_mac: match eip {
                Some(_) => juneau_common::eip::gateway_mac(opts.vni),
                None => fixtures::host_mac(i),
            },
            pod_netns: ns.path().to_owned(),
            pod_name: "eth0".into(),
            pod_mac: fixtures::pod_mac(i),
            mtu: (opts.mtu != 0).then_some(opts.mtu),
            alias: veth::OWNER_ALIAS.into(),
            clsact: true,
        };
        let host_ifindex = veth::create(Some(self.ns.path()), &spec).expect("create veth");
        let dataplane = &mut self.dataplane;
        self.ns
            .run(|| {
                dataplane.attach_port(
                    &spec.host_name,
                    PortSpec {
                        ifindex: 0,
                        vni: opts.vni,
                        mtu: opts.mtu,
                        peer: true,
                        security_groups: opts.security_groups,
                        kind: match (eip, opts.subnet_ip) {
                            (Some(ip), _) => PortKind::ElasticIp {
                                mac: fixtures::pod_mac(i),
                                ip: ip.into(),
                            },
                            (None, Some(ip)) => PortKind::Subnet {
                                mac: fixtures::pod_mac(i),
                                ip: ip.into(),
                            },
                            (None, None) => PortKind::Switched,
                        },
                    },
                )
            })
            .expect("attach port");
        self.pods.push(Pod {
            ns,
            ifname: spec.pod_name,
            host_ifname: spec.host_name,
            host_ifindex,
            mac: spec.pod_mac,
            vni: opts.vni,
        });
        self.pods.len() - 1
    }
}

impl Default for Node {
    fn default() -> Self {
        Self::new()
    }
}

/// Nodes on one underlay bridge (`br0` in its own namespace), each with a VXLAN device
/// in external mode attached to the datapath: the standalone mode's topology
/// (`juneau::standalone::topology`), with a datapath per Node.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub underlay: Netns,
}

pub use juneau::standalone::topology::{UNDERLAY_DEV, VXLAN_DEV, node_ip};

impl Cluster {
    pub fn new(n: usize) -> Cluster {
        Self::with_mtu(n, 1500)
    }

    /// A Cluster whose underlay has `underlay_mtu` (segments up to 50 bytes less).
    pub fn with_mtu(n: usize, underlay_mtu: u32) -> Cluster {
        let names: Vec<String> = (0..n).map(|i| format!("node{i}")).collect();
        let topo = topology::Topology::with_mtu(&Netns::unique("cl"), &names, underlay_mtu)
            .expect("build the topology");
        let mut nodes = Vec::new();
        for t in topo.nodes {
            let ns = Netns::from(t.ns);
            let setup = NodeSetup {
                underlay: UNDERLAY_DEV.into(),
                vtep: t.ip,
                vxlan_mtu: underlay_mtu - 50,
                pin_root: None,
                datapath_encap: true,
                port_attach: Default::default(),
                ct_entries: juneau_common::ct::DEFAULT_ENTRIES,
            };
            let dataplane = ns
                .run(|| daemon::bring_up(&setup))
                .expect("bring up the Node");
            nodes.push(Node {
                dataplane: Whole::of(dataplane).expect("the datapath's writers"),
                pods: Vec::new(),
                ns,
                ip: Some(t.ip),
            });
        }
        Cluster {
            nodes,
            underlay: Netns::from(topo.underlay),
        }
    }
    /// Adds Pod `i` to Node `n` and tells every other Node that `n` now hosts an
    /// endpoint of the segment (as NetworkEndpoints will). Returns the Pod's index in
    /// its Node.
    pub fn add_pod(&mut self, n: usize, i: u8, opts: PodOptions) -> usize {
        let idx = self.nodes[n].add_pod_with(i, opts);
        let vtep = node_ip(n);
        for (m, other) in self.nodes.iter_mut().enumerate() {
            if m != n {
                other
                    .dataplane
                    .add_remote(opts.vni, vtep)
                    .expect("add remote");
            }
        }
        idx
    }

    pub fn pod(&self, n: usize, p: usize) -> &Pod {
        &self.nodes[n].pods[p]
    }
}
