//! Scenario files: one format for both layers a scenario can drive.
//!
//! - `layer: datapath` (`scenarios/datapath/`): the harness builds Nodes with the
//!   daemon's own bring-up and plugs Pods into `segments` (VNI, MTU) directly; steps may
//!   send raw frames and age tables.
//! - `layer: stack` (`scenarios/stack/`): `juneau standalone` admits `objects` as
//!   `kubectl apply` would, runs the controller and one `juneau node` per Node, and
//!   creates Pods (with their annotations) through the real CNI plugin; `outside: true`
//!   adds an upstream router and an external client that steps can act in.
//!
//! Both share Nodes, Pods, `proves`, and the steps that act inside Pods (`daemon`, `run`,
//! `ping`), executed by [`steps::run_common`]; each layer's runner adds its own.
mod outside;
pub mod steps;

pub use outside::Outside;

use std::{collections::BTreeMap, path::Path};

use serde::Deserialize;

/// Which layer a scenario drives.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Datapath,
    Stack,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub description: String,
    pub layer: Layer,
    /// Requirement IDs this scenario proves (`L2-28`, `MX-01`, ...).
    pub proves: Vec<String>,
    /// Node names.
    pub nodes: Vec<String>,
    /// Datapath layer: segments by name.
    #[serde(default)]
    pub segments: BTreeMap<String, SegmentDef>,
    /// Stack layer: Juneau objects, as `kubectl apply` takes them.
    #[serde(default)]
    pub objects: Vec<serde_json::Value>,
    pub pods: Vec<PodDef>,
    /// Stack layer: an upstream router on the underlay and an external client behind
    /// it, which steps name [`UPSTREAM`] and [`CLIENT`] (ElasticIPs are reached from
    /// there).
    /// `outside: true`, or `outside: {bgp: {}}`: the upstream router then runs FRR and
    /// peers with every Node's speaker (the scenario's BGPPeer at its address).
    #[serde(default)]
    pub outside: Outside,
    /// Each step is a map with one key, the step's kind (`send: {...}`).
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub steps: Vec<Step>,
}

/// What steps call the upstream router of a scenario with `outside: true`.
pub const UPSTREAM: &str = "upstream";
/// What steps call the external client of a scenario with `outside: true`.
pub const CLIENT: &str = "client";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentDef {
    pub vni: u32,
    #[serde(default)]
    pub mtu: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodDef {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub node: String,
    /// Stack layer: the Pod's annotations (its NICs).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Stack layer: its labels (Service selectors match them).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Stack layer: its containers' named ports (a Service's `targetPort` by name).
    #[serde(default)]
    pub ports: BTreeMap<String, u16>,
    /// Datapath layer: the segment its eth0 is plugged into.
    #[serde(default)]
    pub segment: Option<String>,
    /// Datapath layer: addresses set on eth0.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Datapath layer: hosts behind a Linux bridge inside the Pod (a peer VM): their
    /// MACs are not the NIC's own.
    #[serde(default)]
    pub bridge_hosts: Vec<HostDef>,
}

fn default_namespace() -> String {
    "default".into()
}

#[derive(Clone, Debug, Deserialize)]
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
    /// Datapath layer: a raw frame, and how many frames each named Pod must receive.
    Send {
        from: String,
        frame: FrameDef,
        expect: BTreeMap<String, usize>,
    },
    /// Datapath layer: wait, then age Node `node`'s tables with `aging_seconds`.
    Age { node: String, aging_seconds: f64 },
    /// Stack layer: delete a Pod as a kubelet does (CNI DEL, then the API), and wait
    /// until the daemons have seen it.
    DeletePod { name: String },
    /// Stack layer: create a Pod of the scenario again (after its `delete_pod`), as it
    /// is declared under `pods`, on `node` when given (another Node: the Pod moved, as a
    /// controller reschedules it), and wait until the daemons have seen it.
    AddPod {
        name: String,
        #[serde(default)]
        node: Option<String>,
    },
    /// Stack layer: wait this many seconds (programs started by `daemon` run on).
    Sleep { seconds: f64 },
    /// Stack layer: replace one of the scenario's objects as `kubectl apply` does, and
    /// wait until every Node's datapath runs it (a NetworkACL's or SecurityGroup's
    /// `status.rulesetVersion` and each Node's rule set at the new generation).
    Apply { object: serde_json::Value },
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

/// A requirement ID: upper-case letters, a dash, digits (`L2-28`, `EIP-07`).
fn is_requirement(id: &str) -> bool {
    id.split_once('-').is_some_and(|(a, n)| {
        !a.is_empty()
            && a.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            && a.as_bytes()[0].is_ascii_uppercase()
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
    })
}

impl Scenario {
    /// Reads and checks a scenario file; the error names the file and the field.
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Scenario::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses and checks a scenario's text.
    pub fn parse(text: &str) -> Result<Scenario, String> {
        let s: Scenario = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        s.check()?;
        Ok(s)
    }

    /// The rules the type cannot say.
    pub fn check(&self) -> Result<(), String> {
        if let Some(bad) = self.proves.iter().find(|p| !is_requirement(p)) {
            return Err(format!(
                "proves: {bad:?} is not a requirement ID (write it as in the spec, e.g. L2-28)"
            ));
        }
        for p in &self.pods {
            if !self.nodes.contains(&p.node) {
                return Err(format!(
                    "pods: {}: node {:?} is not listed under nodes",
                    p.name, p.node
                ));
            }
            match (self.layer, &p.segment) {
                (Layer::Datapath, None) => {
                    return Err(format!(
                        "pods: {}: a datapath scenario plugs every Pod into a segment (segment: <name>)",
                        p.name
                    ));
                }
                (Layer::Datapath, Some(seg)) if !self.segments.contains_key(seg) => {
                    return Err(format!(
                        "pods: {}: segment {seg:?} is not declared under segments",
                        p.name
                    ));
                }
                (Layer::Stack, Some(_)) => {
                    return Err(format!(
                        "pods: {}: a stack scenario gives Pods their NICs by annotations, not segment",
                        p.name
                    ));
                }
                _ => {}
            }
        }
        if self.layer == Layer::Stack {
            if !self.segments.is_empty() {
                return Err("segments: a stack scenario declares L2Networks under objects".into());
            }
            if let Some(p) = self
                .pods
                .iter()
                .find(|p| !p.addresses.is_empty() || p.segment.is_some())
            {
                return Err(format!(
                    "pods: {:?}: segment and addresses are the datapath layer's; a stack Pod names its network in annotations",
                    p.name
                ));
            }
            if let Some(step) = self
                .steps
                .iter()
                .find(|s| matches!(s, Step::Send { .. } | Step::Age { .. }))
            {
                return Err(format!(
                    "steps: {step:?} drives the datapath alone; put it in a datapath scenario"
                ));
            }
        } else if let Some(step) = self.steps.iter().find(|s| {
            matches!(
                s,
                Step::DeletePod { .. } | Step::AddPod { .. } | Step::Apply { .. }
            )
        }) {
            return Err(format!(
                "steps: {step:?} acts through the stack; put it in a stack scenario"
            ));
        } else if let Some(p) = self
            .pods
            .iter()
            .find(|p| !p.labels.is_empty() || !p.ports.is_empty())
        {
            return Err(format!(
                "pods: {:?}: labels and ports are read by the stack's Services; use layer: stack",
                p.name
            ));
        } else if !self.objects.is_empty() {
            return Err("objects: a datapath scenario has no objects (it drives the datapath alone); use layer: stack".into());
        } else if self.outside.any() {
            return Err("outside: only a stack scenario has an outside; use layer: stack".into());
        }
        if self.outside.any() {
            // Steps name Pods and the outside alike, and a Node's namespace
            // (`<prefix>-<node>`) would take the outside's.
            let taken = [UPSTREAM, CLIENT];
            if let Some(n) = self.nodes.iter().find(|n| taken.contains(&n.as_str())) {
                return Err(format!(
                    "nodes: {n:?} is the outside's name (outside: true); rename the Node"
                ));
            }
            if let Some(p) = self.pods.iter().find(|p| taken.contains(&p.name.as_str())) {
                return Err(format!(
                    "pods: {:?} is the outside's name (outside: true); rename the Pod",
                    p.name
                ));
            }
        }
        let places = self.places()?;
        for (i, step) in self.steps.iter().enumerate() {
            // Numbered as the runners narrate them.
            let n = i + 1;
            let known = |role: &str, name: &str| {
                if places.contains(name) {
                    Ok(())
                } else {
                    Err(format!(
                        "steps: step {n}: {role} {name:?} is not a {} of this scenario",
                        match self.layer {
                            Layer::Datapath => "Pod or bridge host",
                            Layer::Stack if self.outside.any() => "Pod, Node, upstream or client",
                            Layer::Stack => "Pod or Node",
                        }
                    ))
                }
            };
            match step {
                Step::Age { node, .. } if !self.nodes.contains(node) => {
                    return Err(format!(
                        "steps: step {n}: age: node {node:?} is not listed under nodes"
                    ));
                }
                Step::Daemon { at, cmd } | Step::Run { at, cmd } => {
                    known("at", at)?;
                    if cmd.is_empty() {
                        return Err(format!(
                            "steps: step {n}: cmd is empty; give the program and its arguments as a list"
                        ));
                    }
                }
                Step::Ping { from, .. } => known("from", from)?,
                Step::Send { from, expect, .. } => {
                    known("from", from)?;
                    // Frames are counted on Pods' interfaces only.
                    if let Some(who) = expect
                        .keys()
                        .find(|w| !self.pods.iter().any(|p| &p.name == *w))
                    {
                        return Err(format!(
                            "steps: step {n}: expect {who:?} is not a Pod of this scenario (frames are counted on Pods)"
                        ));
                    }
                }
                Step::DeletePod { name } => {
                    if !self.pods.iter().any(|p| &p.name == name) {
                        return Err(format!(
                            "steps: step {n}: delete_pod: {name:?} is not a Pod of this scenario"
                        ));
                    }
                }
                Step::AddPod { name, node } => {
                    if !self.pods.iter().any(|p| &p.name == name) {
                        return Err(format!(
                            "steps: step {n}: add_pod: {name:?} is not a Pod of this scenario (declare it under pods; add_pod creates it again)"
                        ));
                    }
                    if let Some(node) = node.as_ref().filter(|n| !self.nodes.contains(n)) {
                        return Err(format!(
                            "steps: step {n}: add_pod: node {node:?} is not listed under nodes"
                        ));
                    }
                }
                Step::Apply { object } => {
                    let id = |v: &serde_json::Value| {
                        (v.get("kind").cloned(), v.pointer("/metadata/name").cloned())
                    };
                    if !self.objects.iter().any(|o| id(o) == id(object)) {
                        return Err(format!(
                            "steps: step {n}: apply: {:?} {:?} is not one of the scenario's objects; apply replaces an object, list it under objects first",
                            id(object).0,
                            id(object).1
                        ));
                    }
                }
                Step::Age { .. } | Step::Sleep { .. } => {}
            }
        }
        Ok(())
    }

    /// Every name a step may act in, each once: Pods, bridge hosts, and in a stack
    /// scenario the Nodes and the outside.
    fn places(&self) -> Result<std::collections::BTreeSet<&str>, String> {
        let mut names: Vec<&str> = Vec::new();
        for p in &self.pods {
            names.push(&p.name);
            // Hosts behind a Pod's bridge exist in the datapath layer only.
            if self.layer == Layer::Datapath {
                names.extend(p.bridge_hosts.iter().map(|h| h.name.as_str()));
            }
        }
        if self.layer == Layer::Stack {
            names.extend(self.nodes.iter().map(String::as_str));
            if self.outside.any() {
                names.extend([UPSTREAM, CLIENT]);
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for name in names {
            if !seen.insert(name) {
                return Err(format!(
                    "{name:?} names two Pods, hosts or Nodes; steps could not tell them apart: rename one"
                ));
            }
        }
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, String> {
        let s: Scenario = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        s.check().map(|()| s)
    }

    #[test]
    fn scenarios_are_checked_for_their_layer_and_their_requirement_ids() {
        let ok = "description: d\nlayer: datapath\nproves: [L2-28]\nnodes: [n0]\nsegments: {s: {vni: 9}}\npods: [{name: a, node: n0, segment: s}]\n";
        assert!(parse(ok).is_ok());
        let bad_id = ok.replace("[L2-28]", "[l2_28]");
        assert!(
            parse(&bad_id)
                .unwrap_err()
                .contains("is not a requirement ID")
        );
        let no_node = ok.replace("node: n0,", "node: n9,");
        assert!(
            parse(&no_node)
                .unwrap_err()
                .contains("is not listed under nodes")
        );
        let stack = "description: d\nlayer: stack\nproves: [L2-28]\nnodes: [n0]\nobjects: []\npods: [{name: a, node: n0, segment: s}]\n";
        assert!(
            parse(stack)
                .unwrap_err()
                .contains("by annotations, not segment")
        );
        let send = "description: d\nlayer: stack\nproves: [L2-28]\nnodes: [n0]\npods: []\nsteps:\n  - send: {from: a, frame: {dst: broadcast, ethertype: 0x88b5}, expect: {}}\n";
        assert!(
            parse(send)
                .unwrap_err()
                .contains("drives the datapath alone")
        );
        assert!(parse(&ok.replace("layer: datapath", "layer: both")).is_err());
        let outside = "description: d\nlayer: stack\nproves: [L2-28]\nnodes: [n0]\noutside: true\npods: [{name: a, node: n0}]\n";
        assert!(parse(outside).is_ok_and(|s| s.outside == Outside::Router));
        assert!(
            parse(&outside.replace("outside: true", "outside: {bgp: {}}"))
                .is_ok_and(|s| s.outside == Outside::Bgp)
        );
        assert!(
            parse(&outside.replace("outside: true", "outside: {ospf: {}}"))
                .unwrap_err()
                .contains("outside: write true, false or {bgp: {}}")
        );
        assert!(
            parse(&outside.replace("name: a", "name: client"))
                .unwrap_err()
                .contains("the outside's name")
        );
        assert!(
            parse(&format!("{ok}outside: true\n"))
                .unwrap_err()
                .contains("only a stack scenario")
        );
    }

    #[test]
    fn every_scenario_file_of_the_repository_passes_the_checks() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut n = 0;
        for layer in ["datapath", "stack"] {
            for f in std::fs::read_dir(root.join(layer)).unwrap().flatten() {
                Scenario::load(&f.path()).unwrap();
                n += 1;
            }
        }
        assert!(n >= 8, "{n} scenario files");
    }

    #[test]
    fn steps_name_only_places_of_their_scenario_before_anything_is_built() {
        let stack = "description: d\nlayer: stack\nproves: [L2-28]\nnodes: [n0]\npods: [{name: a, node: n0}]\nsteps:\n";
        let step = |s: &str| parse(&format!("{stack}  - {s}\n"));
        assert!(step("ping: {from: a, to: 10.0.0.1}").is_ok());
        assert!(
            step("run: {at: n0, cmd: [true]}").is_ok(),
            "a Node of a stack scenario"
        );
        assert_eq!(
            step("ping: {from: clinet, to: a}").unwrap_err(),
            "steps: step 1: from \"clinet\" is not a Pod or Node of this scenario"
        );
        assert!(
            step("run: {at: a, cmd: []}")
                .unwrap_err()
                .contains("step 1: cmd is empty")
        );
        assert!(
            step("daemon: {at: upstream, cmd: [sleep, '9']}")
                .unwrap_err()
                .contains("not a Pod or Node")
        );
        let twice = stack.replace(
            "pods: [{name: a, node: n0}]",
            "pods: [{name: a, node: n0}, {name: a, node: n0}]",
        );
        assert!(parse(&twice).unwrap_err().contains("\"a\" names two Pods"));
        let datapath = "description: d\nlayer: datapath\nproves: [L2-28]\nnodes: [n0]\nsegments: {s: {vni: 9}}\npods: [{name: a, node: n0, segment: s}]\nsteps:\n  - send: {from: a, frame: {dst: broadcast, ethertype: 0x88b5}, expect: {b: 1}}\n";
        assert_eq!(
            parse(datapath).unwrap_err(),
            "steps: step 1: expect \"b\" is not a Pod of this scenario (frames are counted on Pods)"
        );
    }
}
