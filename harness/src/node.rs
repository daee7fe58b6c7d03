//! A Node namespace with Pods plumbed by the daemon's own code (`juneau::node`).
use juneau::node::{
    Dataplane,
    dataplane::PortSpec,
    veth::{self, VethSpec},
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
}

/// Fields drop in declaration order: the datapath detaches before the Pods and the
/// Node namespace go.
pub struct Node {
    pub dataplane: Dataplane,
    pub pods: Vec<Pod>,
    pub ns: Netns,
}

impl Node {
    pub fn new() -> Node {
        let ns = Netns::new("node");
        Node {
            dataplane: Dataplane::load(None).expect("load datapath"),
            pods: Vec::new(),
            ns,
        }
    }

    /// Adds Pod `i` (MAC `fixtures::pod_mac(i)`) on the segment `vni`, plumbed and
    /// attached as the daemon does. Returns its index in `pods`.
    pub fn add_pod(&mut self, i: u8, vni: u32) -> usize {
        let ns = Netns::new("pod");
        let spec = VethSpec {
            host_name: format!("jp{i}"),
            host_mac: fixtures::host_mac(i),
            pod_netns: ns.path().to_owned(),
            pod_name: "eth0".into(),
            pod_mac: fixtures::pod_mac(i),
            mtu: None,
        };
        let host_ifindex = veth::create(Some(self.ns.path()), &spec).expect("create veth");
        let dataplane = &mut self.dataplane;
        self.ns
            .run(|| {
                dataplane.attach_port(
                    &spec.host_name,
                    PortSpec {
                        ifindex: 0,
                        vni,
                        mtu: 0,
                        peer: true,
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
        });
        self.pods.len() - 1
    }
}

impl Default for Node {
    fn default() -> Self {
        Self::new()
    }
}
