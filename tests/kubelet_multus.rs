//! Seed 004 on real Nodes (issue 28, MX-01, MX-02): Multus v4.2.2's thin plugin is the
//! kubelets' CNI (through containerd), Juneau its cluster network (eth0), and
//! NetworkAttachmentDefinitions with Debian's `macvlan` and `bridge` give Pods a
//! second NIC on a Node NIC. Behind those Node NICs a Linux bridge in a lab namespace
//! holds a "VM" (a namespace at 192.168.50.100): each Pod's net1 talks with it both
//! ways, and Juneau's eBPF is on none of those interfaces.
#[path = "common/containerd.rs"]
mod containerd;
#[path = "common/control_plane.rs"]
mod control_plane;
#[path = "common/kubelet.rs"]
mod kubelet;
#[path = "common/kubelet_bed.rs"]
mod kubelet_bed;
#[path = "common/node_bed.rs"]
mod node_bed;
#[path = "common/relay.rs"]
mod relay;
#[path = "common/webhook.rs"]
mod webhook;

use juneau::netns::Owned as OwnedNs;
use kubelet_bed::{Bed, Cni, NAD_CRD, container_of, free, json, node_of};

const VM: &str = "192.168.50.100";

fn nad(name: &str, config: serde_json::Value) -> String {
    format!(
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
         metadata: {{name: {name}, namespace: default}}\nspec:\n  config: '{}'\n",
        config
    )
}

fn multus_pod(name: &str, network: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
         k8s.v1.cni.cncf.io/networks: {network}\n\
         spec:\n  nodeName: node-a\n  terminationGracePeriodSeconds: 1\n  \
         containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    )
}

fn ip(ns: &str, args: &str) {
    let out = std::process::Command::new("ip")
        .args(["-n", ns])
        .args(args.split_whitespace())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ip -n {ns} {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The lab behind node-a: a Linux bridge (`br0` in namespace `lab`) holding the VM
/// and node-a's `eth1` (macvlan's master) and `eth2` (a port of node-a's `br-sec`,
/// the bridge plugin's bridge). Returns the namespaces (deleted by name when dropped).
fn lab(node_ns: &str) -> (OwnedNs, OwnedNs) {
    let n = free();
    let lab = OwnedNs::create(&format!("jn-lab{n}")).unwrap();
    let vm = OwnedNs::create(&format!("jn-vm{n}")).unwrap();
    ip(lab.name(), "link add br0 type bridge");
    ip(lab.name(), "link set br0 up");
    for (port, peer, peer_ns) in [
        ("l-vm", "eth0", vm.name()),
        ("l-eth1", "eth1", node_ns),
        ("l-eth2", "eth2", node_ns),
    ] {
        ip(
            lab.name(),
            &format!("link add {port} type veth peer name {peer} netns {peer_ns}"),
        );
        ip(lab.name(), &format!("link set {port} master br0 up"));
        ip(peer_ns, &format!("link set {peer} up"));
    }
    ip(vm.name(), &format!("addr add {VM}/24 dev eth0"));
    ip(node_ns, "link add br-sec type bridge");
    ip(node_ns, "link set eth2 master br-sec");
    ip(node_ns, "link set br-sec up");
    (lab, vm)
}

fn ping(out: &str) -> bool {
    out.contains("5 packets transmitted, 5 packets received")
        || out.contains("5 packets transmitted, 5 received")
}

/// Five pings from container `ctr` of `rt` to `to`: busybox's output.
fn ping_from(rt: &containerd::Containerd, ctr: &str, to: &str) -> String {
    rt.crictl_ok(&[
        "exec",
        ctr,
        "/bin/busybox",
        "ping",
        "-c",
        "5",
        "-i",
        "0.2",
        "-W",
        "2",
        to,
    ])
}

#[test]
fn mx_01_mx_02_multus_gives_macvlan_and_bridge_nics_that_talk_with_a_vm_and_juneau_stays_off_them()
{
    let bed = Bed::start_with(NAD_CRD, Cni::MultusOverJuneau);
    let node_ns = node_of(&bed.topo, "node-a").ns.name().to_owned();
    let (_lab, vm) = lab(&node_ns);
    let static_ip = |a: &str| serde_json::json!({"type": "static", "addresses": [{"address": a}]});
    bed.apply(&format!(
        "{}---\n{}---\n{}---\n{}",
        nad(
            "macvlan-lab",
            serde_json::json!({"cniVersion": "1.0.0", "type": "macvlan", "master": "eth1",
                               "mode": "bridge", "ipam": static_ip("192.168.50.11/24")})
        ),
        nad(
            "bridge-lab",
            serde_json::json!({"cniVersion": "1.0.0", "type": "bridge", "bridge": "br-sec",
                               "ipam": static_ip("192.168.50.12/24")})
        ),
        multus_pod("pm", "macvlan-lab"),
        multus_pod("pbr", "bridge-lab"),
    ));
    let cp = &bed.cp;
    for (pod, nad_name, addr) in [
        ("pm", "macvlan-lab", "192.168.50.11"),
        ("pbr", "bridge-lab", "192.168.50.12"),
    ] {
        let ips = bed.wait_ready(pod);
        // eth0 is Juneau's (the default Subnet), and the Pod's IPs are its.
        assert!(ips[0].starts_with("10.16."), "{pod}: {ips:?}");
        // Multus' network-status: Juneau's result for eth0, the NAD's for net1.
        let p = json(cp, &["get", "pod", pod, "-n", "default"]);
        let status: serde_json::Value = serde_json::from_str(
            p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
                .as_str()
                .unwrap_or_else(|| panic!("{pod}: no network-status: {p}")),
        )
        .unwrap();
        let entry = |name: &str| {
            status
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{pod}: no {name} in {status}"))
        };
        let primary = entry("juneau");
        assert_eq!(primary["interface"], "eth0", "{status}");
        assert_eq!(primary["ips"][0], ips[0].as_str(), "{status}");
        assert_eq!(primary["default"], true, "{status}");
        let second = entry(&format!("default/{nad_name}"));
        assert_eq!(second["interface"], "net1", "{status}");
        assert_eq!(second["ips"][0], addr, "{status}");
        // L2 with the VM both ways, no loss.
        let rt = &bed.runtimes[0];
        let ctr = container_of(rt, pod);
        let out = ping_from(rt, &ctr, VM);
        assert!(ping(&out), "{pod} -> VM: {out}");
        let out = vm
            .exec(&["ping", "-c", "5", "-i", "0.2", "-W", "2", addr])
            .unwrap_or_else(|e| e);
        assert!(ping(&out), "VM -> {pod}: {out}");
    }
    // MX-02: Juneau's programs are on its own interfaces (the Pods' eth0 ports, the
    // uplink, its VXLAN device) and on none of the Node NICs the other plugins use.
    let (with_programs, rows) = kubelet_bed::with_programs(&bed.topo, "node-a");
    assert!(
        with_programs.iter().any(|i| i == "ul0"),
        "the uplink carries Juneau's program: {rows}"
    );
    for other in ["eth1", "eth2", "br-sec"] {
        assert!(
            !with_programs.iter().any(|i| i == other),
            "{other} carries a program: {rows}"
        );
    }
}

/// `<pod>.<iface>`'s address as the controller allocated it (without its prefix).
fn nic_address(bed: &Bed, nic: &str) -> String {
    json(&bed.cp, &["get", "networkinterfaces", "-n", "default"])["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["metadata"]["name"] == nic))
        .and_then(|i| i["status"]["address"].as_str())
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("no address of {nic}"))
        .to_owned()
}

/// MX-04 and seed 004 with Juneau's own L2Network: a NetworkAttachmentDefinition whose
/// config is Juneau's plugin naming lab-net gives pj's net1 (its eth0 is the cluster
/// network's, on the default Subnet). The peer "VM" is a Pod on lab-net on the other
/// Node, as a KubeVirt VM's launcher Pod is. Both calls reach node-a's daemon, each
/// for its own interface; the result for net1 has no default route; an attachment
/// naming another network is refused by a message that says what to change.
#[test]
fn mx_04_mx_01_juneau_as_a_multus_delegate_gives_net1_alone_on_an_l2network() {
    let bed = Bed::start_with(
        &format!("{NAD_CRD}---\n{}", kubelet_bed::LAB_NET),
        Cni::MultusOverJuneau,
    );
    let socket = &bed.daemons[0].socket;
    let juneau = |network: &str| {
        serde_json::json!({"cniVersion": "1.1.0", "type": "juneau-cni",
                           "socket": socket, "l2Network": network})
    };
    let pod = |name: &str, nad: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
             juneau.loutres.me/networks: '[{{\"interface\": \"net1\", \"l2Network\": \"lab-net\"}}]'\n    \
             k8s.v1.cni.cncf.io/networks: {nad}\n\
             spec:\n  nodeName: node-a\n  terminationGracePeriodSeconds: 1\n  \
             containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
            img = containerd::BUSYBOX
        )
    };
    let vm = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: vmj\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{{\"interface\": \"eth0\", \"l2Network\": \"lab-net\"}}]'\n\
         spec:\n  nodeName: node-b\n  terminationGracePeriodSeconds: 1\n  \
         containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    );
    bed.apply(&format!(
        "{}---\n{}---\n{}---\n{}---\n{vm}",
        nad("juneau-lab", juneau("lab-net")),
        nad("juneau-wrong", juneau("other-net")),
        pod("pj", "juneau-lab"),
        pod("bad", "juneau-wrong"),
    ));
    let ips = bed.wait_ready("pj");
    bed.wait_ready("vmj");
    let cp = &bed.cp;
    assert!(
        ips[0].starts_with("10.16."),
        "eth0 on the default Subnet: {ips:?}"
    );
    let net1 = nic_address(&bed, "pj.net1");
    let peer = nic_address(&bed, "vmj.eth0");
    let p = json(cp, &["get", "pod", "pj", "-n", "default"]);
    let status: serde_json::Value = serde_json::from_str(
        p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
            .as_str()
            .unwrap_or_else(|| panic!("no network-status: {p}")),
    )
    .unwrap();
    let entries = status.as_array().unwrap();
    let find = |name: &str| {
        entries
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    assert_eq!(find("juneau")["interface"], "eth0", "{status}");
    assert_eq!(
        find("juneau")["ips"],
        serde_json::json!([ips[0]]),
        "{status}"
    );
    let second = find("default/juneau-lab");
    assert_eq!(second["interface"], "net1", "{status}");
    assert_eq!(
        second["ips"],
        serde_json::json!([net1]),
        "net1's result alone: {status}"
    );
    // Two calls on node-a, one per interface; the Pod's routes: the default via eth0.
    assert_eq!(bed.served(0, "ADD", "default/pj"), 2);
    let rt = &bed.runtimes[0];
    let ctr = container_of(rt, "pj");
    let routes = rt.crictl_ok(&["exec", &ctr, "/bin/busybox", "ip", "route"]);
    let defaults: Vec<&str> = routes
        .lines()
        .filter(|l| l.starts_with("default"))
        .collect();
    assert_eq!(defaults.len(), 1, "{routes}");
    assert!(defaults[0].contains("dev eth0"), "{routes}");
    // L2 with the "VM" on lab-net, both ways, no loss, once node-a has learned where
    // vmj lives (its NetworkEndpoint, written by node-b's daemon at its ADD, reaches
    // node-a's remote list by the API server's watch: under the suite's load that may
    // come after the Pods are Ready).
    node_bed::wait_for(
        std::time::Duration::from_secs(30),
        || format!("pj never reached vmj over lab-net:\n{}", bed.describe()),
        || {
            rt.busybox(&ctr, &["ping", "-c", "1", "-W", "1", &peer])
                .0
                .then_some(())
        },
    );
    let out = ping_from(rt, &ctr, &peer);
    assert!(ping(&out), "pj -> vmj: {out}");
    let rt_b = &bed.runtimes[1];
    let vm_ctr = container_of(rt_b, "vmj");
    let out = ping_from(rt_b, &vm_ctr, &net1);
    assert!(ping(&out), "vmj -> pj: {out}");
    // The attachment that names another network: the sandbox is refused, and the
    // kubelet's event carries what to change.
    node_bed::wait_for(
        std::time::Duration::from_secs(60),
        || format!("no refusal of bad:\n{}", bed.describe()),
        || {
            let events = cp.kubectl_ok(&[
                "get",
                "events",
                "-n",
                "default",
                "--field-selector",
                "involvedObject.name=bad,reason=FailedCreatePodSandBox",
                "-o",
                "jsonpath={.items[*].message}",
            ]);
            events
                .contains("names l2Network other-net, but Pod default/bad's NIC net1 is on L2Network lab-net: make them the same")
                .then_some(())
        },
    );
    // Deleting pj: its two calls' DELs leave neither endpoint nor veth.
    cp.kubectl_ok(&["delete", "pod", "pj", "bad", "-n", "default", "--wait=true"]);
    node_bed::wait_for(
        std::time::Duration::from_secs(30),
        || {
            format!(
                "left: {:?}",
                kubelet_bed::names(&bed.cp, "networkendpoints")
            )
        },
        || (kubelet_bed::names(&bed.cp, "networkendpoints") == ["vmj.eth0"]).then_some(()),
    );
    assert_eq!(bed.veths("node-a"), 0);
}
