//! A Node with an uplink to an upstream router, for the benchmarks of paths that leave
//! the Node (ElasticIPs, NATGateway): `ul0` (10.99.0.1/24, [`UPLINK_MAC`]) into a new
//! upstream namespace (`eth0`, 10.99.0.254, [`ROUTER_MAC`]), the Node's default route
//! via it, its neighbour permanent (so `bpf_fib_lookup` succeeds), forwarding on.
use std::net::Ipv4Addr;

use juneau::node::daemon::{self, NodeSetup};

use crate::{Netns, Node};

pub const UPLINK_MAC: [u8; 6] = [0x02, 0, 0, 0x99, 0, 1];
pub const ROUTER_MAC: [u8; 6] = [0x02, 0, 0, 0x99, 0, 0xfe];

/// `ip -n <ns> <cmd>`, the command given as one string.
pub fn ip(ns: &Netns, cmd: &str) {
    ns.ip(&cmd.split_whitespace().collect::<Vec<_>>());
}

/// `ns`'s default route via `router` (its MAC `mac`, a permanent neighbour, so
/// `bpf_fib_lookup` succeeds at once) on `dev`.
pub fn default_route_via(ns: &Netns, dev: &str, router: Ipv4Addr, mac: [u8; 6]) {
    ip(ns, &format!("route replace default via {router} dev {dev}"));
    ip(
        ns,
        &format!(
            "neigh replace {router} lladdr {} dev {dev} nud permanent",
            juneau::format_mac(&mac)
        ),
    );
}

/// The interface index of `name` in the calling thread's namespace.
pub fn if_index(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a C string we own.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// The MAC of `dev` in `ns`.
pub fn mac_of(ns: &Netns, dev: &str) -> [u8; 6] {
    let s = ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")]);
    juneau::parse_mac(s.trim()).expect("a MAC")
}

/// `node`'s uplink into a new upstream router namespace; returns the upstream.
pub fn uplink(node: &Netns) -> Netns {
    let up = Netns::new("upstream");
    node.add_veth("ul0", &up, "eth0", None);
    let (router, mine) = (
        juneau::format_mac(&ROUTER_MAC),
        juneau::format_mac(&UPLINK_MAC),
    );
    ip(&up, &format!("link set eth0 address {router} up"));
    ip(&up, "addr add 10.99.0.254/24 dev eth0");
    ip(node, &format!("link set ul0 address {mine} up"));
    ip(node, "addr add 10.99.0.1/24 dev ul0");
    ip(node, "route add default via 10.99.0.254 dev ul0");
    ip(
        node,
        &format!("neigh replace 10.99.0.254 lladdr {router} dev ul0 nud permanent"),
    );
    node.sysctl("net.ipv4.ip_forward", "1");
    up
}

/// A Node brought up by the daemon's own code on its uplink `ul0`, no Pods yet.
/// Returns it and its upstream.
pub fn juneau_node() -> (Node, Netns) {
    let ns = Netns::new("node");
    let upstream = uplink(&ns);
    let setup = NodeSetup {
        underlay: "ul0".into(),
        vtep: Ipv4Addr::new(10, 99, 0, 1),
        vxlan_mtu: 1450,
        pin_root: None,
        datapath_encap: true,
        port_attach: Default::default(),
        ct_entries: juneau_common::ct::DEFAULT_ENTRIES,
    };
    let dataplane = ns
        .run(|| daemon::bring_up(&setup))
        .expect("bring up the Node");
    let node = Node {
        dataplane: juneau::node::dataplane::Whole::of(dataplane).expect("the datapath's writers"),
        pods: Vec::new(),
        ns,
        ip: Some(setup.vtep),
    };
    (node, upstream)
}
