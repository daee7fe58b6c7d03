//! Throughput across Nodes: iperf3 TCP Pod -> Pod on two Nodes through Juneau's VXLAN
//! datapath, beside what flannel does on the same topology (a Linux bridge + a kernel
//! VXLAN device per Node), for 1450 and 9000 byte segments. Single-stream TCP varies a
//! lot on 2 vCPUs: runs are interleaved A/B, 5 each, client and server pinned to
//! different CPUs; medians, and CPU-seconds per GB from /proc/stat beside Gbit/s.
use juneau_harness::{
    Netns,
    bench::{LiveFrames, Measurement, iperf, median, write_part},
    frames,
    node::{Cluster, PodOptions},
};

const ROUNDS: usize = 5;
const SECONDS: &str = "3";
const PPS_FRAMES: u32 = 500_000;

fn mac(i: u8) -> String {
    format!("02:00:00:00:01:{i:02x}")
}

/// Juneau: two Nodes, a Pod each on one segment of `mtu`.
/// With `device_only`, the datapath's own encapsulation is off: every frame between
/// Nodes goes by the VXLAN device (what the datapath did before it encapsulated).
fn juneau(mtu: u32, device_only: bool) -> Cluster {
    let mut c = Cluster::with_mtu(2, mtu + 50);
    if device_only {
        for node in &mut c.nodes {
            node.dataplane.detach_underlay().expect("detach underlay");
        }
    }
    c.add_pod(0, 0, PodOptions::vni(100).mtu(mtu));
    c.add_pod(1, 1, PodOptions::vni(100).mtu(mtu));
    c.pod(0, 0)
        .ns
        .ip(&["addr", "add", "10.70.0.1/24", "dev", "eth0"]);
    c.pod(1, 0)
        .ns
        .ip(&["addr", "add", "10.70.0.2/24", "dev", "eth0"]);
    c
}

/// Two Nodes on an underlay bridge, a Pod each: per Node `ul0` (underlay, `mtu` + 50)
/// and `h0` (the Pod veth's host side, `mtu`), Pod addresses 10.70.0.1 and .2. The
/// baselines below join `h0` and `ul0` in their own way.
struct Plain {
    nodes: Vec<Netns>,
    pods: Vec<Netns>,
    _underlay: Netns,
}

fn plain(mtu: u32) -> Plain {
    let underlay = Netns::new("tcp-ul");
    underlay.ip(&["link", "add", "br0", "type", "bridge"]);
    underlay.ip(&["link", "set", "br0", "up"]);
    let (mut nodes, mut pods) = (Vec::new(), Vec::new());
    let mtu_s = mtu.to_string();
    for i in 0..2u8 {
        let node = Netns::new("tcp-node");
        let pod = Netns::new("tcp-pod");
        let n = format!("n{i}");
        node.add_veth("ul0", &underlay, &n, Some(mtu + 50));
        underlay.ip(&["link", "set", &n, "master", "br0", "up"]);
        node.ip(&[
            "addr",
            "add",
            &format!("10.98.0.{}/24", i + 1),
            "dev",
            "ul0",
        ]);
        node.ip(&["link", "set", "ul0", "up"]);
        node.add_veth("h0", &pod, "eth0", Some(mtu));
        node.ip(&["link", "set", "h0", "up"]);
        pod.ip(&[
            "link",
            "set",
            "eth0",
            "address",
            &mac(i),
            "mtu",
            &mtu_s,
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
    Plain {
        nodes,
        pods,
        _underlay: underlay,
    }
}

/// flannel's way: per Node a Linux bridge with the Pod veth and a kernel VXLAN device,
/// remote Nodes in the VXLAN FDB.
fn kernel_vxlan(mtu: u32) -> Plain {
    let bed = plain(mtu);
    for (i, node) in bed.nodes.iter().enumerate() {
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
        node.ip(&["link", "set", "h0", "master", "br0"]);
        node.ip(&["link", "set", "br0", "up"]);
    }
    bed
}

/// The ceiling of this topology for any datapath: no encapsulation at all. A one-lookup
/// program per hook moves frames between `h0` and `ul0` unchanged (`bpf_redirect` out,
/// `bpf_redirect_peer` in), so the Pods share the underlay's L2. Whatever an overlay
/// datapath does can only be slower; the gap to the kernel VXLAN bridge is the most a
/// faster encapsulation could win here.
fn no_encap(mtu: u32) -> (Plain, Vec<aya::Ebpf>) {
    use aya::{
        maps::HashMap,
        programs::{SchedClassifier, TcAttachType},
    };
    let bed = plain(mtu);
    let mut objs = Vec::new();
    for node in &bed.nodes {
        let mut obj = aya::EbpfLoader::new()
            .load(juneau::baseline::FLOOR_OBJECT)
            .expect("load the floor programs");
        let index = |dev: &str| {
            node.run(|| {
                let c = std::ffi::CString::new(dev).unwrap();
                // SAFETY: a C string we own.
                unsafe { libc::if_nametoindex(c.as_ptr()) }
            })
        };
        let (h0, ul0) = (index("h0"), index("ul0"));
        {
            let mut fwd: HashMap<_, u32, u32> =
                HashMap::try_from(obj.map_mut("jn_floor_fwd").unwrap()).unwrap();
            fwd.insert(h0, ul0, 0).unwrap();
            fwd.insert(ul0, h0, 0).unwrap();
        }
        for (prog, dev) in [("floor_redirect", "h0"), ("floor_redirect_peer", "ul0")] {
            let p: &mut SchedClassifier = obj.program_mut(prog).unwrap().try_into().unwrap();
            p.load().unwrap();
            node.run(|| p.attach(dev, TcAttachType::Ingress)).unwrap();
        }
        objs.push(obj);
    }
    (bed, objs)
}

/// One way of joining two Pods on two Nodes: (name, sending Pod, receiving Pod, the
/// sending Pod veth's host side as (Node, interface)).
struct Bed<'a> {
    name: &'static str,
    send: &'a Netns,
    recv: &'a Netns,
    host: (&'a Netns, &'a str),
}

/// 60-byte IPv4/UDP frames Pod -> Pod across Nodes, from an XDP live-frames generator
/// in the sending Pod (iperf3 tops out at its own per-packet syscalls long before any
/// of these datapaths does), every bed interleaved. Mpps per bed, per round.
fn udp_pps(beds: &[Bed]) -> Vec<Vec<f64>> {
    let generator = LiveFrames::load();
    let mac = |ns: &Netns| {
        let s = ns.exec(&["cat", "/sys/class/net/eth0/address"]);
        let b: Vec<u8> = s
            .trim()
            .split(':')
            .map(|x| u8::from_str_radix(x, 16).unwrap())
            .collect();
        <[u8; 6]>::try_from(b).unwrap()
    };
    let frames: Vec<Vec<u8>> = beds
        .iter()
        .map(|b| {
            // The live frames arrive on the host side by XDP: GRO (NAPI) must be on.
            b.host.0.exec(&["ethtool", "-K", b.host.1, "gro", "on"]);
            // Both sides have spoken (ARP, ICMP), so the destination is known unicast.
            b.send.exec(&["ping", "-c", "1", "-W", "2", "10.70.0.2"]);
            frames::udp(
                (mac(b.send), [10, 70, 0, 1]),
                (mac(b.recv), [10, 70, 0, 2]),
                &[0; 18],
            )
        })
        .collect();
    let mut rates = vec![Vec::new(); beds.len()];
    for _ in 0..ROUNDS {
        for (i, b) in beds.iter().enumerate() {
            rates[i].push(generator.blast(b.send, "eth0", b.recv, &frames[i], PPS_FRAMES));
        }
    }
    rates
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

fn spread(v: &[f64]) -> String {
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, 0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    format!("{lo:.2}-{hi:.2}")
}

fn main() {
    // `JN_TCP_ONLY=juneau` (or `kernel`, `device`, `ceiling`) runs one bed alone, to profile it;
    // `JN_TCP_PARTS=udp` (or `tcp`) one of the two measurements. Either prints only.
    let only = std::env::var("JN_TCP_ONLY").unwrap_or_default();
    let parts = std::env::var("JN_TCP_PARTS").unwrap_or_else(|_| "tcp,udp".into());
    let print_only = !only.is_empty() || parts != "tcp,udp";
    let mut out = Vec::new();
    for mtu in mtus() {
        let cluster = juneau(mtu, false);
        let device = juneau(mtu, true);
        let kernel = kernel_vxlan(mtu);
        let (ceiling, _progs) = no_encap(mtu);
        let beds: Vec<Bed> = [
            Bed {
                name: "juneau",
                send: &cluster.pod(0, 0).ns,
                recv: &cluster.pod(1, 0).ns,
                host: (&cluster.nodes[0].ns, "jp0"),
            },
            Bed {
                name: "kernel",
                send: &kernel.pods[0],
                recv: &kernel.pods[1],
                host: (&kernel.nodes[0], "h0"),
            },
            Bed {
                name: "device",
                send: &device.pod(0, 0).ns,
                recv: &device.pod(1, 0).ns,
                host: (&device.nodes[0].ns, "jp0"),
            },
            Bed {
                name: "ceiling",
                send: &ceiling.pods[0],
                recv: &ceiling.pods[1],
                host: (&ceiling.nodes[0], "h0"),
            },
        ]
        .into_iter()
        .filter(|b| only.is_empty() || only == b.name)
        .collect();
        let (mut gbps, mut cpu) = (vec![Vec::new(); beds.len()], vec![Vec::new(); beds.len()]);
        if parts.contains("tcp") {
            for _ in 0..ROUNDS {
                for (i, b) in beds.iter().enumerate() {
                    if b.name == "device" && mtu != 1450 {
                        // What the encapsulation changed is shown once, at 1450; the
                        // suite stays under 10 minutes.
                        continue;
                    }
                    let (g, c) = iperf(b.send, b.recv, "10.70.0.2", SECONDS);
                    gbps[i].push(g);
                    cpu[i].push(c);
                }
            }
        }
        let pps = if mtu == 1450 && parts.contains("udp") {
            udp_pps(&beds)
        } else {
            Vec::new()
        };
        if print_only {
            for (i, b) in beds.iter().enumerate() {
                println!(
                    "MTU {mtu} {}: {:.2?} Gbit/s, {:.3?} CPU-s/GB, {:.3?} Mpps",
                    b.name,
                    gbps[i],
                    cpu[i],
                    pps.get(i)
                );
            }
            continue;
        }
        let device = !gbps[2].is_empty();
        let note = format!(
            "MTU {mtu}; iperf3 single stream {SECONDS}s, {ROUNDS} interleaved runs each; juneau {} Gbit/s, kernel VXLAN bridge {}, {}no-encapsulation ceiling {}",
            spread(&gbps[0]),
            spread(&gbps[1]),
            if device {
                format!("juneau by the VXLAN device only {}, ", spread(&gbps[2]))
            } else {
                String::new()
            },
            spread(&gbps[3])
        );
        let suffix = if mtu == 1450 { "" } else { "_9000" };
        let med = |v: &mut Vec<f64>| if v.is_empty() { 0.0 } else { median(v) };
        let m: Vec<f64> = gbps.iter_mut().map(med).collect();
        let c: Vec<f64> = cpu.iter_mut().map(med).collect();
        out.push(Measurement::new(
            &format!("tcp_cross_node_vs_kernel_vxlan{suffix}"),
            "Gbit/s",
            m[0],
            ("kernel_vxlan_bridge", m[1]),
            &format!("goal >= 1.1x; {note}"),
        ));
        out.push(Measurement::new(
            &format!("cpu_per_gb_cross_node_vs_kernel_vxlan{suffix}"),
            "CPU-s/GB",
            c[0],
            ("kernel_vxlan_bridge", c[1]),
            &format!(
                "goal <= 0.9x; whole machine busy time from /proc/stat; juneau {} CPU-s/GB, kernel VXLAN bridge {}, ceiling {}; {note}",
                spread(&cpu[0]),
                spread(&cpu[1]),
                spread(&cpu[3])
            ),
        ));
        if device {
            out.push(Measurement::new(
                &format!("tcp_cross_node_device_only_vs_kernel_vxlan{suffix}"),
                "Gbit/s",
                m[2],
                ("kernel_vxlan_bridge", m[1]),
                &format!(
                    "Juneau with its own encapsulation off (every frame by the VXLAN device, as before it encapsulated); {note}"
                ),
            ));
            out.push(Measurement::new(
                &format!("cpu_per_gb_cross_node_device_only_vs_kernel_vxlan{suffix}"),
                "CPU-s/GB",
                c[2],
                ("kernel_vxlan_bridge", c[1]),
                &format!("as above; {note}"),
            ));
        }
        out.push(Measurement::new(
            &format!("tcp_cross_node_no_encap_ceiling_vs_kernel_vxlan{suffix}"),
            "Gbit/s",
            m[3],
            ("kernel_vxlan_bridge", m[1]),
            &format!(
                "the topology's ceiling: no encapsulation, one-lookup redirects only, what the underlay hops alone cost; an encapsulating datapath can match it only within run-to-run noise; {note}"
            ),
        ));
        out.push(Measurement::new(
            &format!("cpu_per_gb_cross_node_no_encap_ceiling_vs_kernel_vxlan{suffix}"),
            "CPU-s/GB",
            c[3],
            ("kernel_vxlan_bridge", c[1]),
            &format!("the topology's ceiling, as above; {note}"),
        ));
        if !pps.is_empty() {
            let note = format!(
                "{PPS_FRAMES} x 60-byte IPv4/UDP frames per round, XDP live-frames generator pinned to CPU 1, {ROUNDS} interleaved rounds; juneau {:.2?}, kernel VXLAN bridge {:.2?}, juneau by the VXLAN device only {:.2?}, no-encapsulation ceiling {:.2?} Mpps",
                pps[0], pps[1], pps[2], pps[3]
            );
            let mut pps = pps;
            let p: Vec<f64> = pps.iter_mut().map(|v| median(v)).collect();
            out.push(Measurement::new(
                "udp_pps_cross_node_vs_kernel_vxlan",
                "Mpps",
                p[0],
                ("kernel_vxlan_bridge", p[1]),
                &note,
            ));
            out.push(Measurement::new(
                "udp_pps_cross_node_device_only_vs_kernel_vxlan",
                "Mpps",
                p[2],
                ("kernel_vxlan_bridge", p[1]),
                &note,
            ));
            out.push(Measurement::new(
                "udp_pps_cross_node_no_encap_ceiling_vs_kernel_vxlan",
                "Mpps",
                p[3],
                ("kernel_vxlan_bridge", p[1]),
                &note,
            ));
        }
    }
    if !print_only {
        write_part("tcp", &out);
    }
}
