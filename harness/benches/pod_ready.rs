//! Pod start-up on real Nodes (issue 28): two kubelet v1.37.2 Nodes on containerd
//! (`tests/common/kubelet_bed.rs`), 100 Pods applied at once (50 per Node, by
//! `nodeName`), from the apply to each Pod's Ready as a watcher polling the API server
//! every 100 ms sees it; the p99 of the 100. Side by side in the same run, rounds
//! interleaved (a fresh bed of each kind per round):
//! - `pod_ready_100_burst_p99_vs_bridge`: Juneau as the Nodes' primary CNI (eth0 on
//!   the default Subnet, its controller and daemons running) against Debian's
//!   `bridge` + `host-local` as the primary on the same kind of Nodes (no Juneau
//!   component running). Goal: within 1.1x.
//! - `pod_network_share_p99` (ms): the part spent in CNI ADD, each plugin timed by a
//!   wrapper around its binary as containerd runs it, p99 over the Pods of Juneau's
//!   rounds, with the daemon's own timing of its parts (`CNI request served`: the wait
//!   for the controller, netlink, the datapath's lock and writes, the API write).
//!   Goal < 1,000 ms; the kubelet's start-up SLO is 5 s at p99 for the whole Pod.
//! - `pod_network_share_p99_vs_bare_plugin`: the same against its ceiling on this bed,
//!   `jn-bare-cni` (harness/src/bin): a veth pair, an address and a default route by
//!   Juneau's own netlink calls and nothing else, as the Nodes' primary CNI.
#[path = "../../tests/common/containerd.rs"]
mod containerd;
#[path = "../../tests/common/control_plane.rs"]
mod control_plane;
#[path = "../../tests/common/kubelet.rs"]
mod kubelet;
#[path = "../../tests/common/kubelet_bed.rs"]
mod kubelet_bed;
#[path = "../../tests/common/node_bed.rs"]
mod node_bed;
#[path = "../../tests/common/relay.rs"]
mod relay;
#[path = "../../tests/common/webhook.rs"]
mod webhook;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use juneau_harness::bench::{Measurement, median, write_part};
use kubelet_bed::{Bed, Cni, NODES, json, names};

const PODS: usize = 100;

fn pods(round: usize) -> String {
    (0..PODS)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: r{round}-p{i}, namespace: default}}\n\
                 spec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 0\n  \
                 containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
                node = NODES[i % NODES.len()],
                img = containerd::BUSYBOX
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// CPU seconds per clock tick of /proc.
fn tick_s() -> f64 {
    // SAFETY: sysconf reads a constant of the C library.
    1.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// CPU seconds the machine spent busy so far, all CPUs (every state of /proc/stat's
/// first line but idle and iowait).
fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let t: Vec<f64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|v| v.parse().ok())
        .collect();
    (t.iter().sum::<f64>() - t[3] - t[4]) * tick_s()
}

/// CPU seconds (user and system) of processes `pids` so far.
fn processes_s(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .map(|stat| {
            // Fields after the command's closing parenthesis: state is the first,
            // utime the 12th, stime the 13th.
            let rest: Vec<f64> = stat
                .rsplit_once(") ")
                .map(|(_, r)| r)
                .unwrap_or_default()
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse().ok())
                .collect();
            rest.iter().sum::<f64>() * tick_s()
        })
        .sum()
}

/// One burst, the seconds from the apply to each Pod's Ready, in Pod order; with
/// the CPU seconds the machine was busy meanwhile and those of Juneau's own processes.
struct Burst {
    ready: Vec<f64>,
    busy_s: f64,
    juneau_s: f64,
    /// etcd's and kube-apiserver's.
    api_s: f64,
    /// When the apply was sent, ns since the epoch (the wrapper's clock).
    applied_ns: u128,
}

/// With `JUNEAU_BENCH_DUMP=<dir>` and `JUNEAU_BENCH_PERF` set: the kernel's lock
/// contention (its `lock:contention_begin`/`end` tracepoints, with call chains) over
/// the whole machine during a burst, into `<dir>/<label>.perf` for `perf lock contention
/// -i`: who waited for RTNL, and for how long. Observation only.
fn lock_trace(label: &str) -> Option<std::process::Child> {
    std::env::var_os("JUNEAU_BENCH_PERF")?;
    let dir = std::path::PathBuf::from(std::env::var_os("JUNEAU_BENCH_DUMP")?);
    std::fs::create_dir_all(&dir).ok()?;
    std::process::Command::new("perf")
        .args([
            "record",
            "-q",
            "-a",
            "-g",
            "-e",
            "lock:contention_begin",
            "-e",
        ])
        .args(["lock:contention_end", "-o"])
        .arg(dir.join(format!("{label}.perf")))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()
}

fn burst(bed: &Bed, round: usize, label: &str) -> Burst {
    let (pids, api) = (bed.juneau_pids(), bed.cp.pids());
    let perf = lock_trace(label);
    let (busy0, juneau0, api0) = (machine_busy_s(), processes_s(&pids), processes_s(&api));
    let start = Instant::now();
    let applied_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_nanos();
    bed.apply(&pods(round));
    let mut ready: BTreeMap<String, f64> = BTreeMap::new();
    while ready.len() < PODS {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "{} of {PODS} Ready after 600 s:\n{}",
            ready.len(),
            bed.describe()
        );
        let seen = start.elapsed().as_secs_f64();
        let list = json(&bed.cp, &["get", "pods", "-n", "default"]);
        for p in list["items"].as_array().into_iter().flatten() {
            let up = p["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            if up && let Some(name) = p["metadata"]["name"].as_str() {
                ready.entry(name.to_owned()).or_insert(seen);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(mut perf) = perf {
        // SIGINT: perf writes its file and exits.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(perf.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let _ = perf.wait();
    }
    let (busy_s, juneau_s, api_s) = (
        machine_busy_s() - busy0,
        processes_s(&pids) - juneau0,
        processes_s(&api) - api0,
    );
    // All gone before the next round: sandboxes, and Juneau's NICs and endpoints.
    bed.cp
        .kubectl_ok(&["delete", "pods", "--all", "-n", "default", "--wait=true"]);
    let deadline = Instant::now() + Duration::from_secs(300);
    while !(names(&bed.cp, "pods").is_empty()
        && (bed.daemons.is_empty() || names(&bed.cp, "networkendpoints").is_empty()))
    {
        assert!(Instant::now() < deadline, "round {round} did not clean up");
        std::thread::sleep(Duration::from_millis(200));
    }
    Burst {
        ready: ready.into_values().collect(),
        busy_s,
        juneau_s,
        api_s,
        applied_ns,
    }
}

/// With `JUNEAU_BENCH_DUMP=<dir>`: each bed's plugin timings (`cni-times.log`: command,
/// ms, start) and Juneau's daemon logs, for a look at when in the burst the slow ADDs
/// ran; `<round>-<kind>-applied` holds the apply's time.
fn dump(bed: &Bed, round: usize, kind: &str, applied_ns: u128) {
    let Some(dir) = std::env::var_os("JUNEAU_BENCH_DUMP").map(std::path::PathBuf::from) else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{round}-{kind}-applied")),
        applied_ns.to_string(),
    )
    .unwrap();
    for (i, rt) in bed.runtimes.iter().enumerate() {
        let _ = std::fs::copy(
            rt.dir.join("cni-times.log"),
            dir.join(format!("{round}-{kind}-node{i}-cni-times.log")),
        );
    }
    for (i, d) in bed.daemons.iter().enumerate() {
        let _ = std::fs::copy(&d.log, dir.join(format!("{round}-{kind}-daemon{i}.log")));
    }
}

/// The value at fraction `q` of the sorted samples (nearest rank).
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// The daemons' ADDs since `skip` lines of each log, each as its `*ms` fields (`ms` the
/// whole ADD, `nic_wait_ms` its wait for the controller's allocation, the other parts
/// as `node::nic::Part` says).
fn adds(bed: &Bed, skip: &[usize]) -> Vec<BTreeMap<String, f64>> {
    bed.daemons
        .iter()
        .zip(skip)
        .flat_map(|(d, skip)| {
            std::fs::read_to_string(&d.log)
                .unwrap_or_default()
                .lines()
                .skip(*skip)
                .filter(|l| l.contains("CNI request served") && l.contains("command=ADD"))
                .map(|l| {
                    l.split_whitespace()
                        .filter_map(|w| {
                            let (k, v) = w.split_once('=')?;
                            Some((k.to_owned(), v.parse().ok()?)).filter(|_| k.ends_with("ms"))
                        })
                        .collect()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Where the ADD at the p99 rank (by its whole time) spent its netlink steps: on a CPU,
/// waiting for one, and asleep (the wait for RTNL, mostly).
fn p99_anatomy(adds: &mut [BTreeMap<String, f64>]) -> String {
    adds.sort_by(|a, b| a["ms"].total_cmp(&b["ms"]));
    let rank = ((0.99 * adds.len() as f64).ceil() as usize).clamp(1, adds.len());
    let a = &adds[rank - 1];
    let f = |k: &str| a.get(k).copied().unwrap_or(f64::NAN);
    format!(
        "{:.0} ms: controller wait {:.0}, netlink {:.0} (veth {:.0}, Pod routes {:.0}, door {:.0}; on a CPU {:.0}, waiting for a CPU {:.0}, asleep {:.0}), endpoint {:.0}; the whole ADD on a CPU {:.0}, waiting for one {:.0}",
        f("ms"),
        f("nic_wait_ms"),
        f("links_ms"),
        f("veth_ms"),
        f("pod_routes_ms"),
        f("door_ms"),
        f("links_cpu_ms"),
        f("links_runq_ms"),
        // The three are rounded apart: never below zero.
        (f("links_ms") - f("links_cpu_ms") - f("links_runq_ms")).max(0.0),
        f("endpoint_ms"),
        f("cpu_ms"),
        f("runq_ms"),
    )
}

fn log_lines(bed: &Bed) -> Vec<usize> {
    bed.daemons
        .iter()
        .map(|d| {
            std::fs::read_to_string(&d.log)
                .unwrap_or_default()
                .lines()
                .count()
        })
        .collect()
}

fn main() {
    let quick = std::env::var_os("JUNEAU_BENCH_QUICK").is_some();
    // JUNEAU_BENCH_ROUNDS: more rounds, to settle a ratio near its goal.
    let rounds = std::env::var("JUNEAU_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 });
    // Per kind: each round's p99 of Ready, and of the plugin's ADD (its wrapper's log).
    let mut ready: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut plugin: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    // Per kind: each round's CPU seconds busy during the burst (the machine's, and
    // Juneau's own processes').
    let mut busy: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut juneau_cpu: Vec<f64> = Vec::new();
    let mut api_cpu: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    // Juneau's daemon's own timing: the whole ADD and its parts (`node::nic::Part`).
    const PARTS: [&str; 14] = [
        "ms",
        "nic_wait_ms",
        "links_ms",
        "lock_ms",
        "attach_ms",
        "endpoint_ms",
        "session_ms",
        "veth_ms",
        "pod_routes_ms",
        "door_ms",
        "links_cpu_ms",
        "links_runq_ms",
        "cpu_ms",
        "runq_ms",
    ];
    let mut parts: Vec<Vec<f64>> = vec![Vec::new(); PARTS.len()];
    // Each round's ADD at the p99 rank, part by part.
    let mut anatomy: Vec<String> = Vec::new();
    let all = [Cni::Juneau, Cni::Bridge, Cni::Bare];
    for round in 0..rounds {
        // One control plane at a time (the fixture's): each round a fresh bed of each
        // kind, each round starting with the next kind, so none always goes first.
        for k in 0..all.len() {
            let cni = all[(round + k) % all.len()];
            let bed = Bed::start_with("", cni);
            let lines = log_lines(&bed);
            let kind = match cni {
                Cni::Juneau => "juneau",
                Cni::Bridge => "bridge",
                _ => "bare",
            };
            let b = burst(&bed, round, &format!("{round}-{kind}"));
            let mut t = b.ready;
            let p99 = quantile(&mut t, 0.99);
            println!(
                "round {round} {cni:?}: p99 {p99:.2} s, median {:.2} s, CPU busy {:.1} s (Juneau's processes {:.1} s, etcd and the API server {:.1} s)",
                median(&mut t),
                b.busy_s,
                b.juneau_s,
                b.api_s
            );
            ready.entry(kind).or_default().push(p99);
            busy.entry(kind).or_default().push(b.busy_s);
            api_cpu.entry(kind).or_default().push(b.api_s);
            if cni == Cni::Juneau {
                juneau_cpu.push(b.juneau_s);
            }
            dump(&bed, round, kind, b.applied_ns);
            let mut ms: Vec<f64> = bed
                .runtimes
                .iter()
                .flat_map(|rt| {
                    std::fs::read_to_string(rt.dir.join("cni-times.log"))
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| {
                            l.strip_prefix("ADD ")?
                                .split_whitespace()
                                .next()?
                                .parse()
                                .ok()
                        })
                        .collect::<Vec<f64>>()
                })
                .collect();
            assert_eq!(ms.len(), PODS, "{kind}: one ADD per Pod");
            let add_p99 = quantile(&mut ms, 0.99);
            println!("round {round} {cni:?}: the plugin's ADD p99 {add_p99:.0} ms");
            plugin.entry(kind).or_default().push(add_p99);
            if cni == Cni::Juneau {
                let mut all = adds(&bed, &lines);
                for (key, p99s) in PARTS.iter().zip(&mut parts) {
                    let mut v: Vec<f64> = all.iter().filter_map(|a| a.get(*key).copied()).collect();
                    assert_eq!(v.len(), PODS, "one {key} per ADD");
                    p99s.push(quantile(&mut v, 0.99));
                }
                let a = p99_anatomy(&mut all);
                println!("round {round} Juneau: the p99 ADD {a}");
                anatomy.push(format!("round {round}: {a}"));
            }
        }
    }
    let rounds_of = |m: &BTreeMap<&str, Vec<f64>>, k: &str| {
        m[k].iter()
            .map(|v| format!("{v:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (juneau_rounds, bridge_rounds) = (rounds_of(&ready, "juneau"), rounds_of(&ready, "bridge"));
    let (juneau_adds, bare_adds) = (rounds_of(&plugin, "juneau"), rounds_of(&plugin, "bare"));
    let med = |m: &mut BTreeMap<&str, Vec<f64>>, k: &str| median(m.get_mut(k).unwrap());
    let (jm, bm) = (med(&mut ready, "juneau"), med(&mut ready, "bridge"));
    let bare_ready = med(&mut ready, "bare");
    let (busy_j, busy_b, own) = (
        med(&mut busy, "juneau"),
        med(&mut busy, "bridge"),
        median(&mut juneau_cpu),
    );
    let (api_j, api_b) = (med(&mut api_cpu, "juneau"), med(&mut api_cpu, "bridge"));
    let (am, bam, floor) = (
        med(&mut plugin, "juneau"),
        med(&mut plugin, "bridge"),
        med(&mut plugin, "bare"),
    );
    let daemon = PARTS
        .iter()
        .zip(&mut parts)
        .map(|(k, v)| {
            let name = match k.trim_end_matches("_ms") {
                "ms" => "the whole ADD",
                other => other,
            };
            format!("{name} {:.0} ms", median(v))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let how = format!(
        "{PODS} Pods (busybox, no probes) applied in one kubectl apply over 2 kubelet v1.37.2 Nodes on containerd 2.4.2 (50 each by nodeName), Ready as a 100 ms poll of the API server sees it; the median over {rounds} rounds of each round's p99, the beds' rounds interleaved"
    );
    let timing = "each plugin's ADD timed the same way, by a wrapper around its binary as containerd runs it (the process included)";
    write_part(
        "pod_ready",
        &[
            Measurement::new(
                "pod_ready_100_burst_p99_vs_bridge",
                "s",
                jm,
                ("debian_bridge_host_local", bm),
                &format!(
                    "goal: within 1.1x; Juneau as the primary CNI (eth0 on the default Subnet; its controller and daemons on the Nodes) vs Debian's bridge + host-local (containernetworking-plugins 1.1.1) as the primary on the same kind of Nodes with no Juneau component; each round's p99, Juneau: {juneau_rounds} s, bridge: {bridge_rounds} s; the bare plugin's bed (below): {bare_ready:.2} s; CPU seconds busy during a burst (median, 2 vCPUs): {busy_j:.1} s with Juneau, of which its controller and daemons {own:.1} s and etcd with the API server {api_j:.1} s; {busy_b:.1} s with bridge, etcd with the API server {api_b:.1} s; {how}"
                ),
            ),
            Measurement::new(
                "pod_network_share_p99",
                "ms",
                am,
                ("kubelet_pod_startup_slo", 5000.0),
                &format!(
                    "goal < 1000 ms; Juneau's CNI ADD, p99 over the {PODS} Pods of a round, {timing}; the daemon's own timing of its part, each p99 on its own: {daemon}; the ADD at the p99 rank of each round, by the daemon's timing: {}; Debian's bridge plugin in its bed: p99 {bam:.0} ms; beside it the kubelet's start-up SLO for the whole Pod (5 s at p99); {how}",
                    anatomy.join("; ")
                ),
            ),
            Measurement::new(
                "pod_network_share_p99_vs_bare_plugin",
                "ms",
                am,
                ("bare_plugin_add_p99", floor),
                &format!(
                    "the ceiling of the row above on this bed: jn-bare-cni, a plugin that makes a veth pair, an address and a default route by the same netlink calls as Juneau and nothing else (no controller, datapath or API), as the primary on the same kind of Nodes, {timing}: its p99 is {floor:.0} ms (each round's: {bare_adds} ms; Juneau's: {juneau_adds} ms), so a goal of 1000 ms lies {} this bed (the burst's 100 sandboxes share the kernel's netlink lock and 2 vCPUs with every plugin); {how}",
                    if floor > 1000.0 { "beyond" } else { "within" }
                ),
            ),
        ],
    );
}
