//! Benchmark results: every measurement is written beside its baseline, measured in the
//! same run, as one part file per benchmark under `bench/parts/`; `cargo xtask bench`
//! merges them into `bench/results.json` and renders `docs/benchmarks.md`.
use std::path::PathBuf;

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub name: String,
    pub unit: String,
    pub value: f64,
    pub baseline_name: String,
    pub baseline_value: f64,
    /// value / baseline_value.
    pub ratio: f64,
    /// Goal, how measured, and anything a reader needs to trust the figure.
    pub note: String,
}

impl Measurement {
    pub fn new(name: &str, unit: &str, value: f64, baseline: (&str, f64), note: &str) -> Self {
        Self {
            name: name.into(),
            unit: unit.into(),
            value,
            baseline_name: baseline.0.into(),
            baseline_value: baseline.1,
            ratio: if baseline.1 != 0.0 {
                value / baseline.1
            } else {
                0.0
            },
            note: note.into(),
        }
    }
}

/// `bench/parts/<part>.json` at the workspace root.
pub fn write_part(part: &str, ms: &[Measurement]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/parts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{part}.json")),
        serde_json::to_string_pretty(ms).unwrap(),
    )
    .unwrap();
    for m in ms {
        println!(
            "{:<40} {:>12.2} {:<8} vs {:<34} {:>12.2}  ratio {:.2}",
            m.name, m.value, m.unit, m.baseline_name, m.baseline_value, m.ratio
        );
    }
}

/// The median of a sample (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Two measurements taken in turns (`a` then `b`, `per_round` times each), the median
/// of each round, then the median of the rounds: the beds of a comparison see the same
/// machine moments.
pub fn interleaved_medians(
    rounds: usize,
    per_round: usize,
    mut a: impl FnMut() -> f64,
    mut b: impl FnMut() -> f64,
) -> (f64, f64) {
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (mut aa, mut bb) = (Vec::with_capacity(per_round), Vec::with_capacity(per_round));
        for _ in 0..per_round {
            aa.push(a());
            bb.push(b());
        }
        ra.push(median(&mut aa));
        rb.push(median(&mut bb));
    }
    (median(&mut ra), median(&mut rb))
}

/// Pins the calling thread to one CPU. A live-frames generator and the softirq work it
/// triggers (veth NAPI, backlog) then share that CPU, as in the toolchain notes'
/// one-core figures, instead of migrating between the two vCPUs mid-round.
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(rc, 0, "sched_setaffinity to CPU {cpu}");
    }
}

/// Loads an nftables ruleset into `ns` (the kernel baselines' netfilter), from a file
/// written for `nft -f` and removed after.
pub fn nft_load(ns: &crate::Netns, rules: &str) {
    let file = std::env::temp_dir().join(format!(
        "juneau-bench-{}-{}.nft",
        std::process::id(),
        ns.name()
    ));
    std::fs::write(&file, rules).expect("write the ruleset");
    let loaded = ns.try_exec(&["nft", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.expect("nft -f (is nftables installed? cargo xtask bootstrap installs it)");
}

/// `Ip: ForwDatagrams` of `ns`: packets its kernel forwarded (a baseline's proof that
/// its kernel did the work, a Juneau bed's that its kernel did none).
pub fn forwarded(ns: &crate::Netns) -> u64 {
    let snmp = ns.exec(&["cat", "/proc/net/snmp"]);
    let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
    let i = names
        .split_whitespace()
        .position(|n| n == "ForwDatagrams")
        .expect("ForwDatagrams");
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

/// The packets the first counter of nftables chain `chain` of table `ip table` in `ns`
/// counted (a NAT rule's: one per new connection).
pub fn nft_counted(ns: &crate::Netns, table: &str, chain: &str) -> u64 {
    let listed = ns.exec(&["nft", "list", "chain", "ip", table, chain]);
    let words: Vec<&str> = listed.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "packets")
        .expect("a counter");
    words[at + 1].parse().expect("a count")
}

/// Turns GRO on for `dev` in `ns`: the XDP live-frames generator's frames are dropped by
/// a veth whose peer has it off.
pub fn gro_on(ns: &crate::Netns, dev: &str) {
    ns.exec(&["ethtool", "-K", dev, "gro", "on"]);
}

/// A Node namespace with `n` veth pairs (`h<i>` in the Node) into `n` Pod namespaces
/// (`eth0`, MAC `pod_mac(i)`), all up and joined by nothing: the bed for baselines.
pub fn plain_pods(n: usize) -> (crate::Netns, Vec<crate::Netns>) {
    let node = crate::Netns::new("bed-node");
    let pods: Vec<crate::Netns> = (0..n).map(|_| crate::Netns::new("bed-pod")).collect();
    for (i, pod) in pods.iter().enumerate() {
        let host = format!("h{i}");
        node.add_veth(&host, pod, "eth0", None);
        let mac = juneau::format_mac(&crate::frames::fixtures::pod_mac(i as u8));
        pod.ip(&["link", "set", "eth0", "address", &mac, "up"]);
        node.ip(&["link", "set", &host, "up"]);
    }
    (node, pods)
}

/// The ceiling of a Pod-to-Pod path on this machine: two plain Pods (`plain_pods(2)`),
/// the first's veth `h0` handing every frame to the second by one bare
/// `bpf_redirect_peer` (`floor_redirect_peer`), nothing looked up or rewritten. Each bed
/// loads a floor object of its own (ifindexes of different beds would collide in one
/// map). Returns (sender, receiver, what keeps the bed up).
pub fn redirect_peer_bed() -> (crate::Netns, crate::Netns, Box<dyn std::any::Any>) {
    peer_bed(false)
}

/// [`redirect_peer_bed`] both ways (`h1` hands every frame to the first Pod too): the
/// ceiling of a connection between two Pods of one Node, a bare wire of two
/// `bpf_redirect_peer`s.
pub fn redirect_peer_pair() -> (crate::Netns, crate::Netns, Box<dyn std::any::Any>) {
    peer_bed(true)
}

fn peer_bed(both: bool) -> (crate::Netns, crate::Netns, Box<dyn std::any::Any>) {
    let (node, mut pods) = plain_pods(2);
    let b = pods.pop().unwrap();
    let a = pods.pop().unwrap();
    gro_on(&node, "h0");
    if both {
        gro_on(&node, "h1");
    }
    let mut floor = aya::EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    let ifindex = |name: &str| {
        let c = std::ffi::CString::new(name).unwrap();
        // SAFETY: a C string we own.
        unsafe { libc::if_nametoindex(c.as_ptr()) }
    };
    let (h0, h1) = node.run(|| (ifindex("h0"), ifindex("h1")));
    let mut fwd =
        aya::maps::HashMap::<_, u32, u32>::try_from(floor.map_mut("jn_floor_fwd").unwrap())
            .unwrap();
    fwd.insert(h0, h1, 0).unwrap();
    if both {
        fwd.insert(h1, h0, 0).unwrap();
    }
    let prog: &mut aya::programs::SchedClassifier = floor
        .program_mut("floor_redirect_peer")
        .unwrap()
        .try_into()
        .unwrap();
    prog.load().unwrap();
    let devs: &[&str] = if both { &["h0", "h1"] } else { &["h0"] };
    for dev in devs {
        node.run(|| prog.attach(dev, aya::programs::TcAttachType::Ingress))
            .unwrap();
    }
    (a, b, Box::new((floor, node)))
}

/// The kernel has no pktgen: an XDP live-frames test run transmits `count` copies of
/// `frame` out of `ifname` in the `sender` namespace (the `xdp_tx` program of
/// [`juneau::baseline::FLOOR_OBJECT`], XDP_TX). The interface's peer needs GRO on, or
/// the frames are dropped silently. Delivery is counted where it matters, at
/// `receiver`'s `eth0` rx counter, never by the generator. Returns Mpps delivered.
pub struct LiveFrames {
    obj: aya::Ebpf,
}

impl LiveFrames {
    pub fn load() -> Self {
        let mut obj = aya::EbpfLoader::new()
            .load(juneau::baseline::FLOOR_OBJECT)
            .expect("load the generator");
        for name in ["xdp_tx", "xdp_tx_new_source", "xdp_tx_template"] {
            let prog: &mut aya::programs::Xdp = obj
                .program_mut(name)
                .unwrap_or_else(|| panic!("the floor object has no {name}"))
                .try_into()
                .expect("an XDP program");
            prog.load().unwrap_or_else(|e| panic!("load {name}: {e}"));
        }
        Self { obj }
    }

    /// [`Self::blast`] for paths that rewrite the frame: every frame is written afresh
    /// from `frame` (at least 64 bytes) before it leaves, so a recycled page never
    /// carries what the path under test wrote into it.
    pub fn blast_fresh(
        &mut self,
        sender: &crate::Netns,
        ifname: &str,
        receiver: &crate::Netns,
        frame: &[u8],
        count: u32,
    ) -> f64 {
        assert!(frame.len() >= 64, "the template is 64 bytes");
        let mut words = [0u64; 8];
        for (i, w) in words.iter_mut().enumerate() {
            *w = u64::from_ne_bytes(frame[8 * i..8 * i + 8].try_into().unwrap());
        }
        let mut map: aya::maps::Array<_, [u64; 8]> = aya::maps::Array::try_from(
            self.obj
                .map_mut("jn_floor_template")
                .expect("jn_floor_template"),
        )
        .expect("an array");
        map.set(0, words, 0).expect("write the template");
        self.blast_with("xdp_tx_template", 1, sender, ifname, receiver, frame, count)
    }

    /// [`Self::blast_with`] of `xdp_tx` on CPU 1.
    pub fn blast(
        &self,
        sender: &crate::Netns,
        ifname: &str,
        receiver: &crate::Netns,
        frame: &[u8],
        count: u32,
    ) -> f64 {
        self.blast_with("xdp_tx", 1, sender, ifname, receiver, frame, count)
    }

    /// `count` frames by `program` (`xdp_tx`, or `xdp_tx_new_source` for a MAC flood)
    /// from a thread pinned to `cpu`; Mpps delivered at `receiver`'s eth0.
    #[allow(clippy::too_many_arguments)]
    pub fn blast_with(
        &self,
        program: &str,
        cpu: usize,
        sender: &crate::Netns,
        ifname: &str,
        receiver: &crate::Netns,
        frame: &[u8],
        count: u32,
    ) -> f64 {
        use aya::programs::{TestRun, TestRunAttrs, TestRunOptions, Xdp};
        let generator: &Xdp = self
            .obj
            .program(program)
            .expect("a generator program")
            .try_into()
            .expect("an XDP program");
        let before = receiver.counter("eth0", "rx_packets");
        let start = std::time::Instant::now();
        sender
            .run(|| {
                pin_to_cpu(cpu);
                let c = std::ffi::CString::new(ifname).unwrap();
                // SAFETY: a C string we own.
                let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
                // struct xdp_md: data 0, data_end = the frame's length (the kernel
                // insists), then ingress_ifindex: the interface XDP_TX sends by.
                let mut ctx = [0u8; 24];
                ctx[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
                ctx[12..16].copy_from_slice(&ifindex.to_ne_bytes());
                generator.test_run(TestRunOptions {
                    data_in: Some(frame),
                    ctx_in: Some(&ctx),
                    repeat: count,
                    attrs: TestRunAttrs::new().xdp_live_frames(64),
                    ..Default::default()
                })
            })
            .expect("XDP live frames");
        let elapsed = start.elapsed().as_secs_f64();
        let delivered = receiver.counter("eth0", "rx_packets") - before;
        delivered as f64 / elapsed / 1e6
    }
}

use std::process::{Child, Command, Stdio};

/// Busy and total jiffies of all CPUs, from /proc/stat.
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

/// An iperf3 server, stopped (only it) when dropped.
struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// (Gbit/s, CPU-seconds per GB) of one iperf3 run from `client` to `server_ip`.
pub fn iperf(
    client: &crate::Netns,
    server: &crate::Netns,
    server_ip: &str,
    seconds: &str,
) -> (f64, f64) {
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
    std::thread::sleep(std::time::Duration::from_millis(150));
    let (b0, _) = busy_jiffies();
    let out = client.exec(&["iperf3", "-c", server_ip, "-t", seconds, "-A", "0", "-J"]);
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

/// Seconds since the epoch, as `ping -D` stamps its replies.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The replies a `ping -D` wrote to `path`, as (unix time received, unix time sent:
/// received less the round trip): what the failover benchmarks time.
pub fn ping_replies(path: &std::path::Path) -> Vec<(f64, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("bytes from"))
        .filter_map(|l| {
            let at: f64 = l.strip_prefix('[')?.split(']').next()?.parse().ok()?;
            let rtt: f64 = l.split("time=").nth(1)?.split(' ').next()?.parse().ok()?;
            Some((at, at - rtt / 1000.0))
        })
        .collect()
}

/// Seconds from `start` (unix time) to the first reply in `probes` to a probe sent at
/// or after it, polling every 10 ms; `cap` when none came within it.
pub fn first_reply_after(probes: &std::path::Path, start: f64, cap: std::time::Duration) -> f64 {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(&(at, _)) = ping_replies(probes)
            .iter()
            .find(|&&(_, sent)| sent >= start)
        {
            return at - start;
        }
        if t0.elapsed() >= cap {
            return cap.as_secs_f64();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
