//! Packet rate on one Node, 60-byte frames Pod -> Pod, side by side in one run:
//! Juneau's datapath (`port_ingress`, bpf_redirect_peer), a Linux bridge (what the
//! Multus bridge CNI does), and a bare `bpf_redirect_peer` program (the physical limit
//! of this path). The kernel has no pktgen: an XDP live-frames test run in the sender
//! Pod transmits the frames (XDP_TX on its eth0); delivery is counted by the receiving
//! Pod's eth0 rx counter, never by the generator.
use juneau::node::dataplane::PortAttach;
use juneau_harness::{
    Netns, Node,
    bench::{LiveFrames, Measurement, gro_on, median, plain_pods, redirect_peer_bed, write_part},
    capture::inject,
    frames::{self, BROADCAST, fixtures::*},
};

const FRAMES: u32 = 1_000_000;
const ROUNDS: usize = 5;

/// Two Pods and whatever joins them; `sender`/`receiver` are the Pod namespaces.
struct Bed {
    sender: Netns,
    receiver: Netns,
    _keep: Box<dyn std::any::Any>,
}

fn juneau_bed(attach: PortAttach) -> Bed {
    let mut node = Node::new();
    node.dataplane.set_port_attach(attach);
    node.add_pod(0, 1);
    node.add_pod(1, 1);
    gro_on(&node.ns, "jp0");
    // The receiver speaks once, so its MAC is known unicast.
    inject(
        &node.pods[1].ns,
        "eth0",
        &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hi"),
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    let pods: Vec<_> = node.pods.drain(..).collect();
    let mut it = pods.into_iter();
    let (a, b) = (it.next().unwrap(), it.next().unwrap());
    Bed {
        sender: a.ns,
        receiver: b.ns,
        _keep: Box::new(node),
    }
}

/// Node namespace with two veth pairs into two Pod namespaces.
fn plain_pair() -> (Netns, Netns, Netns) {
    let (node, mut pods) = plain_pods(2);
    let b = pods.pop().unwrap();
    (node, pods.pop().unwrap(), b)
}

fn bridge_bed() -> Bed {
    let (node, a, b) = plain_pair();
    node.ip(&["link", "add", "br0", "type", "bridge"]);
    node.ip(&["link", "set", "br0", "up"]);
    node.ip(&["link", "set", "h0", "master", "br0"]);
    node.ip(&["link", "set", "h1", "master", "br0"]);
    gro_on(&node, "h0");
    inject(
        &b,
        "eth0",
        &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hi"),
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    Bed {
        sender: a,
        receiver: b,
        _keep: Box::new(node),
    }
}

fn peer_bed() -> Bed {
    let (sender, receiver, keep) = redirect_peer_bed();
    Bed {
        sender,
        receiver,
        _keep: keep,
    }
}

fn main() {
    let generator = LiveFrames::load();
    let beds = [
        ("juneau", juneau_bed(PortAttach::Filter)),
        ("linux bridge", bridge_bed()),
        ("bpf_redirect_peer", peer_bed()),
        ("juneau tcx", juneau_bed(PortAttach::Tcx)),
    ];
    for b in &beds {
        // IPv4 on the Pods, so the UDP rounds are delivered to a real stack.
        b.1.sender
            .ip(&["addr", "add", "10.0.1.10/24", "dev", "eth0"]);
        b.1.receiver
            .ip(&["addr", "add", "10.0.1.11/24", "dev", "eth0"]);
    }
    let raw = frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"pps");
    let udp = frames::udp((pod_mac(0), pod_ip(0)), (pod_mac(1), pod_ip(1)), &[0; 18]);
    let mut rates = vec![Vec::new(); beds.len()];
    let mut udp_rates = vec![Vec::new(); beds.len()];
    // `JN_PPS_ONLY=juneau` (or `linux bridge`, `bpf_redirect_peer`) blasts one bed
    // only and prints, to profile it alone (`perf record -C 1`).
    let only = std::env::var("JN_PPS_ONLY").unwrap_or_default();
    if !only.is_empty() {
        let (_, bed) = beds
            .iter()
            .find(|b| b.0 == only)
            .expect("JN_PPS_ONLY: no such bed");
        for _ in 0..ROUNDS {
            let r = generator.blast(&bed.sender, "eth0", &bed.receiver, &raw, FRAMES);
            println!("{only}: {r:.2} Mpps");
        }
        return;
    }
    for _ in 0..ROUNDS {
        for (i, (_, bed)) in beds.iter().enumerate() {
            rates[i].push(generator.blast(&bed.sender, "eth0", &bed.receiver, &raw, FRAMES));
            udp_rates[i].push(generator.blast(&bed.sender, "eth0", &bed.receiver, &udp, FRAMES));
        }
    }
    let m: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    let u: Vec<f64> = udp_rates.iter_mut().map(|r| median(r)).collect();
    // Read in the bridge's own Node namespace, where its netfilter hook would act.
    let nf = beds[1]
        .1
        ._keep
        .downcast_ref::<Netns>()
        .and_then(|node| {
            node.try_exec(&["sysctl", "-n", "net.bridge.bridge-nf-call-iptables"])
                .ok()
        })
        .unwrap_or_default()
        .trim()
        .to_owned();
    println!(
        "pps, one Node, {FRAMES} x 60-byte frames per round, median of {ROUNDS} interleaved rounds: {:?}",
        beds.iter().map(|b| b.0).zip(&m).collect::<Vec<_>>()
    );
    write_part(
        "pps",
        &[
            Measurement::new(
                "pps_one_node_vs_linux_bridge",
                "Mpps",
                m[0],
                ("linux_bridge", m[1]),
                "goal >= 2.0x; non-IP 0x88b5 frames, so bridge netfilter hooks are not involved",
            ),
            Measurement::new(
                "pps_one_node_vs_redirect_peer",
                "Mpps",
                m[0],
                ("bare_bpf_redirect_peer", m[2]),
                "goal >= 0.8x",
            ),
            Measurement::new(
                "pps_one_node_udp_vs_linux_bridge",
                "Mpps",
                u[0],
                ("linux_bridge", u[1]),
                &format!(
                    "60-byte IPv4/UDP frames; bridge-nf-call-iptables = {nf:?} in the bridge's Node namespace"
                ),
            ),
            Measurement::new(
                "pps_one_node_udp_vs_redirect_peer",
                "Mpps",
                u[0],
                ("bare_bpf_redirect_peer", u[2]),
                "60-byte IPv4/UDP frames",
            ),
            Measurement::new(
                "pps_one_node_tc_filter_vs_tcx",
                "Mpps",
                m[0],
                ("juneau_ports_on_tcx", m[3]),
                "the same datapath with its ports attached as tc filters (the default: no RCU grace period per CNI ADD) and as TCX links (--port-attach tcx), in the same rounds",
            ),
        ],
    );
}
