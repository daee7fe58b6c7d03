//! Throughput across Nodes: iperf3 TCP Pod -> Pod on two Nodes through Juneau's VXLAN
//! datapath, beside what flannel does on the same topology (a Linux bridge + a kernel
//! VXLAN device per Node), for 1450 and 9000 byte segments. Single-stream TCP varies a
//! lot on 2 vCPUs: runs are interleaved A/B, 5 each, client and server pinned to
//! different CPUs; medians, and CPU-seconds per GB from /proc/stat beside Gbit/s.
use std::process::{Child, Command, Stdio};

use juneau_harness::{
    Netns,
    bench::{LiveFrames, Measurement, median, udp_frame, write_part},
    node::{Cluster, PodOptions},
};

const ROUNDS: usize = 5;
const SECONDS: &str = "3";
const PPS_FRAMES: u32 = 1_000_000;

fn busy_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    let idle = cpu[3] + cpu[4];
    (cpu.iter().sum::<u64>() - idle, cpu.iter().sum())
}

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// (Gbit/s, CPU-seconds per GB) of one iperf3 run from `client` to `server_ip`.
fn iperf(client: &Netns, server: &Netns, server_ip: &str) -> (f64, f64) {
    let _srv = Server(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                server.name(),
                "iperf3",
                "-s",
                "-1",
                "-A",
                "1",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (b0, _) = busy_jiffies();
    let out = client.exec(&["iperf3", "-c", server_ip, "-t", SECONDS, "-A", "0", "-J"]);
    let (b1, _) = busy_jiffies();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let bytes = v["end"]["sum_received"]["bytes"].as_f64().unwrap_or(1.0);
    let hz = 100.0; // USER_HZ
    let cpu_s = (b1 - b0) as f64 / hz;
    (bps / 1e9, cpu_s / (bytes / 1e9))
}

fn mac(i: u8) -> String {
    format!("02:00:00:00:01:{i:02x}")
}

/// Juneau: two Nodes, a Pod each on one segment of `mtu`.
fn juneau(mtu: u32) -> (Cluster, String) {
    let mut c = Cluster::with_mtu(2, mtu + 50);
    c.add_pod(0, 0, PodOptions { vni: 100, mtu });
    c.add_pod(1, 1, PodOptions { vni: 100, mtu });
    c.pod(0, 0)
        .ns
        .ip(&["addr", "add", "10.70.0.1/24", "dev", "eth0"]);
    c.pod(1, 0)
        .ns
        .ip(&["addr", "add", "10.70.0.2/24", "dev", "eth0"]);
    (c, "10.70.0.2".into())
}

/// flannel's way: per Node a Linux bridge with the Pod veth and a kernel VXLAN device,
/// remote Nodes in the VXLAN FDB.
fn kernel_vxlan(mtu: u32) -> (Vec<Netns>, Vec<Netns>, Netns) {
    let underlay = Netns::new("kvx-ul");
    underlay.ip(&["link", "add", "br0", "type", "bridge"]);
    underlay.ip(&["link", "set", "br0", "up"]);
    let (mut nodes, mut pods) = (Vec::new(), Vec::new());
    for i in 0..2u8 {
        let node = Netns::new("kvx-node");
        let pod = Netns::new("kvx-pod");
        let ul_mtu = (mtu + 50).to_string();
        node.ip(&[
            "link",
            "add",
            "ul0",
            "mtu",
            &ul_mtu,
            "type",
            "veth",
            "peer",
            "name",
            &format!("n{i}"),
            "netns",
            underlay.name(),
        ]);
        underlay.ip(&[
            "link",
            "set",
            &format!("n{i}"),
            "mtu",
            &ul_mtu,
            "master",
            "br0",
            "up",
        ]);
        node.ip(&[
            "addr",
            "add",
            &format!("10.98.0.{}/24", i + 1),
            "dev",
            "ul0",
        ]);
        node.ip(&["link", "set", "ul0", "up"]);
        node.ip(&[
            "link",
            "add",
            "vx",
            "mtu",
            &mtu.to_string(),
            "type",
            "vxlan",
            "id",
            "100",
            "dstport",
            "4789",
            "dev",
            "ul0",
            "local",
            &format!("10.98.0.{}", i + 1),
            "nolearning",
        ]);
        node.exec(&[
            "bridge",
            "fdb",
            "append",
            "00:00:00:00:00:00",
            "dev",
            "vx",
            "dst",
            &format!("10.98.0.{}", 2 - i),
        ]);
        node.ip(&["link", "add", "br0", "type", "bridge"]);
        node.ip(&["link", "set", "vx", "master", "br0", "up"]);
        node.ip(&[
            "link",
            "add",
            "h0",
            "mtu",
            &mtu.to_string(),
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            pod.name(),
        ]);
        node.ip(&["link", "set", "h0", "master", "br0", "up"]);
        node.ip(&["link", "set", "br0", "up"]);
        pod.ip(&[
            "link",
            "set",
            "eth0",
            "address",
            &mac(i),
            "mtu",
            &mtu.to_string(),
            "up",
        ]);
        pod.ip(&[
            "addr",
            "add",
            &format!("10.70.0.{}/24", i + 1),
            "dev",
            "eth0",
        ]);
        nodes.push(node);
        pods.push(pod);
    }
    (nodes, pods, underlay)
}

/// 60-byte IPv4/UDP frames Pod -> Pod across Nodes, from an XDP live-frames generator
/// in the sending Pod (iperf3 tops out at its own per-packet syscalls long before either
/// datapath does), Juneau beside the kernel VXLAN bridge, interleaved.
fn udp_pps(
    (jnode, jhost): (&Netns, &str),
    jsend: &Netns,
    jrecv: &Netns,
    (knode, khost): (&Netns, &str),
    ksend: &Netns,
    krecv: &Netns,
) -> Measurement {
    let generator = LiveFrames::load();
    let frame = |send: &Netns, recv: &Netns| {
        let mac = |ns: &Netns| {
            let s = ns.exec(&["cat", "/sys/class/net/eth0/address"]);
            let b: Vec<u8> = s
                .trim()
                .split(':')
                .map(|x| u8::from_str_radix(x, 16).unwrap())
                .collect();
            <[u8; 6]>::try_from(b).unwrap()
        };
        // Both sides have spoken (ARP, ICMP), so the destination is known unicast.
        send.exec(&["ping", "-c", "1", "-W", "2", "10.70.0.2"]);
        udp_frame((mac(send), [10, 70, 0, 1]), (mac(recv), [10, 70, 0, 2]))
    };
    for (ns, dev) in [(jnode, jhost), (knode, khost)] {
        ns.exec(&["ethtool", "-K", dev, "gro", "on"]);
    }
    let (jf, kf) = (frame(jsend, jrecv), frame(ksend, krecv));
    let (mut j, mut k) = (Vec::new(), Vec::new());
    let only = std::env::var("JN_TCP_ONLY").unwrap_or_default();
    for _ in 0..ROUNDS {
        if only != "kernel" {
            j.push(generator.blast(jsend, "eth0", jrecv, &jf, PPS_FRAMES));
        }
        if only != "juneau" {
            k.push(generator.blast(ksend, "eth0", krecv, &kf, PPS_FRAMES));
        }
    }
    if !only.is_empty() {
        println!("udp pps across Nodes: juneau {j:.2?} kernel {k:.2?} Mpps");
        j.push(0.0);
        k.push(0.0);
    }
    let note = format!(
        "{PPS_FRAMES} x 60-byte IPv4/UDP frames per round, XDP live-frames generator pinned to CPU 1, {ROUNDS} interleaved rounds; juneau {j:.2?}, kernel VXLAN bridge {k:.2?} Mpps"
    );
    Measurement::new(
        "udp_pps_cross_node_vs_kernel_vxlan",
        "Mpps",
        median(&mut j),
        ("kernel_vxlan_bridge", median(&mut k)),
        &note,
    )
}

/// `JN_TCP_MTUS=1450` (comma list) narrows a run, e.g. under `perf record`.
fn mtus() -> Vec<u32> {
    std::env::var("JN_TCP_MTUS")
        .ok()
        .map(|v| {
            v.split(',')
                .map(|m| m.trim().parse().expect("JN_TCP_MTUS"))
                .collect()
        })
        .unwrap_or_else(|| vec![1450, 9000])
}

fn main() {
    let mut out = Vec::new();
    for mtu in mtus() {
        let (cluster, ip) = juneau(mtu);
        let (kn, kpods, _ku) = kernel_vxlan(mtu);
        let (mut jg, mut jc, mut kg, mut kc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // `JN_TCP_ONLY=juneau` or `=kernel` runs one side only (to profile it alone);
        // `JN_TCP_PARTS=udp` (or `tcp`) one of the two measurements.
        let only = std::env::var("JN_TCP_ONLY").unwrap_or_default();
        let parts = std::env::var("JN_TCP_PARTS").unwrap_or_else(|_| "tcp,udp".into());
        for _ in 0..ROUNDS {
            if !parts.contains("tcp") {
                break;
            }
            if only != "kernel" {
                let (g, c) = iperf(&cluster.pod(0, 0).ns, &cluster.pod(1, 0).ns, &ip);
                jg.push(g);
                jc.push(c);
            }
            if only != "juneau" {
                let (g, c) = iperf(&kpods[0], &kpods[1], "10.70.0.2");
                kg.push(g);
                kc.push(c);
            }
        }
        if mtu == 1450 && parts.contains("udp") {
            out.push(udp_pps(
                (&cluster.nodes[0].ns, "jp0"),
                &cluster.pod(0, 0).ns,
                &cluster.pod(1, 0).ns,
                (&kn[0], "h0"),
                &kpods[0],
                &kpods[1],
            ));
        }
        if !only.is_empty() || !parts.contains("tcp") {
            println!("MTU {mtu}: juneau {jg:?} Gbit/s {jc:?} CPU-s/GB; kernel {kg:?} {kc:?}");
            continue;
        }
        let spread = |v: &Vec<f64>| {
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, 0f64), |(l, h), x| (l.min(*x), h.max(*x)));
            format!("{lo:.2}-{hi:.2}")
        };
        let note = format!(
            "MTU {mtu}; iperf3 single stream {SECONDS}s, {ROUNDS} interleaved runs each; juneau {} Gbit/s, kernel VXLAN bridge {}",
            spread(&jg),
            spread(&kg)
        );
        let suffix = if mtu == 1450 { "" } else { "_9000" };
        out.push(Measurement::new(
            &format!("tcp_cross_node_vs_kernel_vxlan{suffix}"),
            "Gbit/s",
            median(&mut jg),
            ("kernel_vxlan_bridge", median(&mut kg)),
            &format!("goal >= 1.1x; {note}"),
        ));
        out.push(Measurement::new(
            &format!("cpu_per_gb_cross_node_vs_kernel_vxlan{suffix}"),
            "CPU-s/GB",
            median(&mut jc),
            ("kernel_vxlan_bridge", median(&mut kc)),
            &format!("goal <= 0.9x; whole machine busy time from /proc/stat; {note}"),
        ));
    }
    write_part("tcp", &out);
}
