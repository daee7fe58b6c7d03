//! Real clients across Nodes on an L2Network (L2-01, L2-02, L2-25, L2-29): a user's own
//! DHCP server, IPv6 neighbour discovery, 802.1Q-tagged frames, and a host behind a
//! peer VM's bridge.
use juneau::scenario::steps::Daemon;
use juneau_harness::{
    Capture, Netns,
    capture::inject,
    frames::{self, BROADCAST, fixtures::*},
    node::{Cluster, PodOptions},
};

const VNI: u32 = 6001;

fn spawn_in(ns: &Netns, argv: &[&str]) -> Daemon {
    Daemon::start(ns.name(), argv).expect("spawn")
}

#[test]
fn l2_02_l2_25_dhcp_server_pod_leases_an_address_to_a_pod_on_another_node() {
    let mut c = Cluster::new(2);
    c.add_pod(0, 0, PodOptions::vni(VNI));
    c.add_pod(1, 1, PodOptions::vni(VNI));
    let server = &c.pod(0, 0).ns;
    let client = &c.pod(1, 0).ns;
    // A cidr-less segment: Juneau gave no address (L2-25); the user's server has one.
    assert!(
        !client
            .ip(&["-4", "addr", "show", "dev", "eth0"])
            .contains("inet ")
    );
    server.ip(&["addr", "add", "10.50.0.1/24", "dev", "eth0"]);
    let dir = std::env::temp_dir().join(format!("jn-dhcp-{}", server.name()));
    std::fs::create_dir_all(&dir).unwrap();
    let leases = dir.join("leases");
    let _dnsmasq = spawn_in(
        server,
        &[
            "dnsmasq",
            "--no-daemon",
            "--conf-file=/dev/null",
            "--interface=eth0",
            "--bind-interfaces",
            "--port=0",
            "--dhcp-range=10.50.0.100,10.50.0.150,255.255.255.0,1h",
            &format!("--dhcp-leasefile={}", leases.display()),
            &format!("--pid-file={}", dir.join("pid").display()),
        ],
    );
    let out = client.try_exec(&[
        "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "10", "-T", "1",
    ]);
    assert!(out.is_ok(), "udhcpc got no lease: {out:?}");
    let addr = client.ip(&["-4", "addr", "show", "dev", "eth0"]);
    assert!(
        addr.contains("inet 10.50.0.1"),
        "no leased address on eth0: {addr}"
    );
    client.ping_all(&[], "10.50.0.1", 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn l2_01_ipv6_link_local_ping_with_neighbour_discovery_across_nodes() {
    let mut c = Cluster::new(2);
    c.add_pod(0, 0, PodOptions::vni(VNI));
    c.add_pod(1, 1, PodOptions::vni(VNI));
    for (n, p) in [(0, 0), (1, 0)] {
        let ns = &c.pod(n, p).ns;
        ns.sysctl("net.ipv6.conf.eth0.accept_dad", "0");
        ns.sysctl("net.ipv6.conf.eth0.disable_ipv6", "0");
    }
    let shown = c
        .pod(1, 0)
        .ns
        .ip(&["-6", "-o", "addr", "show", "dev", "eth0", "scope", "link"]);
    let ll = shown
        .split_whitespace()
        .skip_while(|w| *w != "inet6")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("no link-local address: {shown}"))
        .to_owned();
    c.pod(0, 0).ns.ping_all(&["-6"], &format!("{ll}%eth0"), 2);
}

#[test]
fn l2_01_an_802_1q_tagged_frame_crosses_nodes_intact() {
    let mut c = Cluster::new(2);
    c.add_pod(0, 0, PodOptions::vni(VNI));
    c.add_pod(1, 1, PodOptions::vni(VNI));
    let cap = Capture::start(&c.pod(1, 0).ns, "eth0", "node1-pod0");
    let mut tagged = frames::raw(BROADCAST, pod_mac(0), 0x8100, &[0x60, 0x07, 0x88, 0xb5]);
    tagged.truncate(18);
    tagged.extend_from_slice(b"vlan 7, priority 3, across the overlay");
    tagged.resize(64, 0);
    inject(&c.pod(0, 0).ns, "eth0", &tagged);
    let got = cap.received(std::time::Duration::from_millis(200));
    assert_eq!(got, vec![tagged], "the tagged frame changed or was lost");
}

#[test]
fn l2_29_mx_01_a_host_behind_a_peer_vm_bridge_reaches_a_pod_on_another_node() {
    let mut c = Cluster::new(2);
    c.add_pod(0, 0, PodOptions::vni(VNI));
    c.add_pod(1, 1, PodOptions::vni(VNI));
    // The "VM": Pod 0's namespace holds a Linux bridge joining its NIC and a host
    // behind it, whose MAC is not the NIC's own.
    let vm = &c.pod(0, 0).ns;
    let host = Netns::new("host");
    vm.ip(&["link", "add", "br0", "type", "bridge"]);
    vm.ip(&["link", "set", "eth0", "master", "br0"]);
    vm.add_veth("v0", &host, "eth0", None);
    vm.ip(&["link", "set", "v0", "master", "br0", "up"]);
    vm.ip(&["link", "set", "br0", "up"]);
    let behind = behind_mac(0, 5);
    let mac = juneau::format_mac(&behind);
    host.ip(&["link", "set", "eth0", "address", &mac, "up"]);
    host.ip(&["addr", "add", "10.60.0.5/24", "dev", "eth0"]);
    let pod = &c.pod(1, 0).ns;
    pod.ip(&["addr", "add", "10.60.0.2/24", "dev", "eth0"]);
    host.ping_all(&[], "10.60.0.2", 3);
    pod.ping_all(&[], "10.60.0.5", 3);
    // Both Nodes learned the host's MAC by itself, behind the VM's port / node0.
    let at0 = c.nodes[0].dataplane.fdb(VNI).unwrap();
    let e = at0
        .iter()
        .find(|(k, _)| k.mac == behind)
        .expect("node0 learned the host")
        .1;
    assert_eq!(e.ifindex, c.pod(0, 0).host_ifindex);
    let at1 = c.nodes[1].dataplane.fdb(VNI).unwrap();
    assert!(at1.iter().any(|(k, e)| k.mac == behind && e.vtep != 0));
    drop(host);
}
