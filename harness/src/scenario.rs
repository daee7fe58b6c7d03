//! The datapath layer's runner of scenario files (`scenarios/datapath/*.yaml`, the
//! format of `juneau::scenario`): it builds the Cluster with the daemon's own bring-up,
//! plugs Pods into segments, runs the shared steps (`juneau::scenario::steps`) and its
//! own (raw frames with expected counts, aging), and says which expectation failed. A
//! new scenario needs no new Rust.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use juneau::scenario::steps::{self, Bed, Daemon};
pub use juneau::scenario::{Layer, Scenario, Step};

use crate::{
    Netns,
    frames::{self, fixtures},
    node::{Cluster, PodOptions},
    scene::Scene,
};

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

/// Reads a datapath scenario (`layer: datapath`).
pub fn load(path: &Path) -> Result<Scenario, String> {
    let s = Scenario::load(path)?;
    if s.layer != Layer::Datapath {
        return Err(format!(
            "{}: a {:?} scenario runs with juneau standalone, not the harness",
            path.display(),
            s.layer
        ));
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
}

impl Bed for Running {
    fn netns_name(&self, at: &str) -> Result<String, String> {
        self.ns(at).map(|ns| ns.name().to_owned())
    }

    fn tmp(&self) -> &Path {
        &self.tmp
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
    let node_index = |name: &str| {
        s.nodes
            .iter()
            .position(|n| n == name)
            .expect("checked by load")
    };
    let mut cluster = Cluster::new(s.nodes.len());
    let mut places = BTreeMap::new();
    let mut hosts = Vec::new();
    for (i, p) in s.pods.iter().enumerate() {
        let segment = p.segment.as_deref().expect("checked by load");
        let seg = &s.segments[segment];
        let node = node_index(&p.node);
        let index = cluster.add_pod(node, i as u8, PodOptions::vni(seg.vni).mtu(seg.mtu));
        let mac = fixtures::pod_mac(i as u8);
        let pod = cluster.pod(node, index);
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
        places.insert(p.name.clone(), Place::Pod { node, index, mac });
        say(format!(
            "  pod {} on {} segment {} (VNI {}){}",
            p.name,
            p.node,
            segment,
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
    let mut daemons: Vec<Daemon> = Vec::new();
    for (n, step) in s.steps.iter().enumerate() {
        let n = n + 1;
        if steps::run_common(n, step, &*r, &mut daemons, say)? {
            continue;
        }
        match step {
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
                // Every Pod is checked: one not named under `expect` must get nothing
                // (that `expect` names Pods only was checked when the file was loaded).
                let mut got = Vec::new();
                for (who, place) in &r.places {
                    let Place::Pod { node, index, .. } = place else {
                        continue;
                    };
                    let want = expect.get(who).copied().unwrap_or(0);
                    let cap = format!("node{node}-pod{index}");
                    let have = r.scene.frames(&seen, &cap).len();
                    if have != want {
                        return Err(format!(
                            "step {n}: {who} received {have} frame(s), expected {want}{}",
                            if expect.contains_key(who) {
                                ""
                            } else {
                                " (not named under expect)"
                            }
                        ));
                    }
                    if have > 0 || expect.contains_key(who) {
                        got.push(format!("{who}={have}"));
                    }
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
                let i = s
                    .nodes
                    .iter()
                    .position(|x| x == node)
                    .ok_or(format!("step {n}: no node {node}"))?;
                let dp = &mut r.scene.cluster.nodes[i].dataplane;
                let removed = dp.age(aging).map_err(|e| format!("step {n}: {e}"))?;
                say(format!(
                    "  step {n}: {node} aged {removed} entr(ies) older than {aging_seconds}s"
                ));
            }
            Step::Daemon { .. } | Step::Run { .. } | Step::Ping { .. } | Step::Sleep { .. } => {
                unreachable!("shared steps are run by run_common")
            }
            Step::DeletePod { .. } | Step::AddPod { .. } | Step::Apply { .. } => {
                unreachable!("refused by Scenario::check")
            }
        }
    }
    Ok(())
}
