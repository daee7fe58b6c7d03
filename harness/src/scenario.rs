//! Scenario files (`scenarios/*.yaml`): a topology, its segments and Pods, and steps
//! with expected outcomes. A new scenario needs no new Rust: the runner builds the
//! Cluster with the daemon's own code, runs the steps with real tools, and says which
//! expectation failed.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde::Deserialize;

use crate::{
    Netns,
    frames::{self, fixtures},
    node::{Cluster, PodOptions},
    scene::Scene,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub description: String,
    /// Requirement IDs this scenario proves.
    pub proves: Vec<String>,
    pub nodes: usize,
    pub segments: BTreeMap<String, SegmentDef>,
    pub pods: Vec<PodDef>,
    /// Each step is a map with one key, the step's kind (`send: {...}`).
    #[serde(with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentDef {
    pub vni: u32,
    #[serde(default)]
    pub mtu: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodDef {
    pub name: String,
    pub node: usize,
    pub segment: String,
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Hosts behind a Linux bridge inside the Pod (a peer VM): their MACs are not the
    /// NIC's own.
    #[serde(default)]
    pub bridge_hosts: Vec<HostDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDef {
    pub name: String,
    pub mac: String,
    #[serde(default)]
    pub addresses: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// A long-running program in a Pod or host, stopped when the scenario ends.
    Daemon { at: String, cmd: Vec<String> },
    /// A program that must succeed.
    Run { at: String, cmd: Vec<String> },
    /// `ping` that must get every reply.
    Ping { from: String, to: String },
    /// A raw frame, and how many frames each named Pod must receive.
    Send {
        from: String,
        frame: FrameDef,
        expect: BTreeMap<String, usize>,
    },
    /// Wait, then age Node `node`'s tables with `aging_seconds`.
    Age { node: usize, aging_seconds: f64 },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameDef {
    /// `broadcast`, a Pod or host name, or a MAC.
    pub dst: String,
    /// A Pod or host name, or a MAC; the sender's own MAC when absent.
    #[serde(default)]
    pub src: Option<String>,
    pub ethertype: u16,
    #[serde(default)]
    pub payload: String,
}

/// A program this runner started; stopped (only it) on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bytes: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("{s:?} is not a MAC (write aa:bb:cc:dd:ee:ff)"))?;
    bytes
        .try_into()
        .map_err(|_| format!("{s:?} is not a MAC (six octets)"))
}

pub fn load(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let s: Scenario =
        serde_yaml_ng::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    for p in &s.pods {
        if p.node >= s.nodes {
            return Err(format!(
                "pod {}: node {} does not exist (nodes: {})",
                p.name, p.node, s.nodes
            ));
        }
        if !s.segments.contains_key(&p.segment) {
            return Err(format!(
                "pod {}: segment {:?} is not declared under segments",
                p.name, p.segment
            ));
        }
    }
    Ok(s)
}

/// A place steps can act from: a Pod (node, index in node) or a host behind a bridge.
enum Place {
    Pod {
        node: usize,
        index: usize,
        mac: [u8; 6],
    },
    Host {
        ns: usize,
        mac: [u8; 6],
    },
}

struct Running {
    scene: Scene,
    hosts: Vec<Netns>,
    places: BTreeMap<String, Place>,
    tmp: PathBuf,
}

impl Running {
    fn ns(&self, name: &str) -> Result<&Netns, String> {
        match self.places.get(name) {
            Some(Place::Pod { node, index, .. }) => Ok(&self.scene.cluster.pod(*node, *index).ns),
            Some(Place::Host { ns, .. }) => Ok(&self.hosts[*ns]),
            None => Err(format!("no Pod or host named {name:?}")),
        }
    }

    fn mac(&self, name: &str) -> Result<[u8; 6], String> {
        match self.places.get(name) {
            Some(Place::Pod { mac, .. } | Place::Host { mac, .. }) => Ok(*mac),
            None if name == "broadcast" => Ok(frames::BROADCAST),
            None => parse_mac(name),
        }
    }

    fn expand(&self, cmd: &[String]) -> Vec<String> {
        cmd.iter()
            .map(|a| a.replace("{tmp}", self.tmp.to_str().unwrap()))
            .collect()
    }
}

/// Runs a scenario file, narrating each step with `say`. Everything it made is gone
/// when it returns, whatever the outcome.
pub fn run(path: &Path, say: &mut dyn FnMut(String)) -> Result<(), String> {
    let s = load(path)?;
    say(format!(
        "scenario {}: {}",
        path.display(),
        s.description.trim()
    ));
    let mut cluster = Cluster::new(s.nodes);
    let mut places = BTreeMap::new();
    let mut hosts = Vec::new();
    for (i, p) in s.pods.iter().enumerate() {
        let seg = &s.segments[&p.segment];
        let index = cluster.add_pod(
            p.node,
            i as u8,
            PodOptions {
                vni: seg.vni,
                mtu: seg.mtu,
            },
        );
        let mac = fixtures::pod_mac(i as u8);
        let pod = cluster.pod(p.node, index);
        for a in &p.addresses {
            pod.ns.ip(&["addr", "add", a, "dev", "eth0"]);
        }
        if !p.bridge_hosts.is_empty() {
            pod.ns.ip(&["link", "add", "br0", "type", "bridge"]);
            pod.ns.ip(&["link", "set", "eth0", "master", "br0"]);
            pod.ns.ip(&["link", "set", "br0", "up"]);
        }
        for (h, host) in p.bridge_hosts.iter().enumerate() {
            let ns = Netns::new("host");
            let v = format!("v{h}");
            pod.ns.add_veth(&v, &ns, "eth0", None);
            pod.ns.ip(&["link", "set", &v, "master", "br0", "up"]);
            let hmac = parse_mac(&host.mac).map_err(|e| format!("host {}: mac: {e}", host.name))?;
            ns.ip(&["link", "set", "eth0", "address", &host.mac, "up"]);
            for a in &host.addresses {
                ns.ip(&["addr", "add", a, "dev", "eth0"]);
            }
            places.insert(
                host.name.clone(),
                Place::Host {
                    ns: hosts.len(),
                    mac: hmac,
                },
            );
            hosts.push(ns);
        }
        places.insert(
            p.name.clone(),
            Place::Pod {
                node: p.node,
                index,
                mac,
            },
        );
        say(format!(
            "  pod {} on node{} segment {} (VNI {}){}",
            p.name,
            p.node,
            p.segment,
            seg.vni,
            if p.addresses.is_empty() {
                String::new()
            } else {
                format!(" {}", p.addresses.join(","))
            }
        ));
    }
    let tmp = std::env::temp_dir().join(format!(
        "jn-scenario-{}-{}",
        std::process::id(),
        cluster.underlay.name()
    ));
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let mut r = Running {
        scene: Scene::new(cluster),
        hosts,
        places,
        tmp: tmp.clone(),
    };
    let result = steps(&s, &mut r, say);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn steps(s: &Scenario, r: &mut Running, say: &mut dyn FnMut(String)) -> Result<(), String> {
    let mut daemons = Vec::new();
    for (n, step) in s.steps.iter().enumerate() {
        let n = n + 1;
        match step {
            Step::Daemon { at, cmd } => {
                let cmd = r.expand(cmd);
                let child = Command::new("ip")
                    .args(["netns", "exec", r.ns(at)?.name()])
                    .args(&cmd)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("step {n}: cannot start {cmd:?}: {e}"))?;
                daemons.push(Daemon(child));
                std::thread::sleep(Duration::from_millis(300));
                say(format!("  step {n}: started {} in {at}", cmd[0]));
            }
            Step::Run { at, cmd } => {
                let cmd = r.expand(cmd);
                let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
                r.ns(at)?
                    .try_exec(&argv)
                    .map_err(|e| format!("step {n}: {e}"))?;
                let mut shown = cmd.join(" ");
                if shown.len() > 72 {
                    shown.truncate(shown.floor_char_boundary(69));
                    shown.push_str("...");
                }
                say(format!("  step {n}: {shown} in {at}: ok"));
            }
            Step::Ping { from, to } => {
                let out = r
                    .ns(from)?
                    .try_exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", to])
                    .map_err(|e| format!("step {n}: ping {from} -> {to}: {e}"))?;
                let summary = out
                    .lines()
                    .find(|l| l.contains("transmitted"))
                    .unwrap_or("");
                say(format!("  step {n}: ping {from} -> {to}: {summary}"));
            }
            Step::Send {
                from,
                frame,
                expect,
            } => {
                let src = match &frame.src {
                    Some(s) => r.mac(s)?,
                    None => r.mac(from)?,
                };
                let f = frames::raw(
                    r.mac(&frame.dst)?,
                    src,
                    frame.ethertype,
                    frame.payload.as_bytes(),
                );
                // Count only what this frame causes: drop what earlier steps left.
                r.scene.settle();
                let ns = r.ns(from)?;
                crate::capture::inject(ns, "eth0", &f);
                let seen = r.scene.settle();
                let mut got = Vec::new();
                for (who, want) in expect {
                    let Some(Place::Pod { node, index, .. }) = r.places.get(who) else {
                        return Err(format!(
                            "step {n}: expect names {who:?}, which is not a Pod"
                        ));
                    };
                    let cap = format!("node{node}-pod{index}");
                    let have = r.scene.frames(&seen, &cap).len();
                    if have != *want {
                        return Err(format!(
                            "step {n}: {who} received {have} frame(s), expected {want}"
                        ));
                    }
                    got.push(format!("{who}={have}"));
                }
                say(format!(
                    "  step {n}: {from} sends 0x{:04x} to {}: {}",
                    frame.ethertype,
                    frame.dst,
                    got.join(" ")
                ));
            }
            Step::Age {
                node,
                aging_seconds,
            } => {
                let aging = Duration::from_secs_f64(*aging_seconds);
                std::thread::sleep(aging + Duration::from_millis(600));
                let dp = &mut r
                    .scene
                    .cluster
                    .nodes
                    .get_mut(*node)
                    .ok_or(format!("step {n}: no node{node}"))?
                    .dataplane;
                let removed = dp.age(aging).map_err(|e| format!("step {n}: {e}"))?;
                say(format!(
                    "  step {n}: node{node} aged {removed} entr(ies) older than {aging_seconds}s"
                ));
            }
        }
    }
    Ok(())
}
