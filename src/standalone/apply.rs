//! A running stack's objects changed as `kubectl apply` changes them, and the wait until
//! every Node's datapath runs the change: what a scenario's `apply` step and the rule
//! change benchmark need (issue 25: a rule change takes effect within 1 s, and
//! `status.rulesetVersion` says which version the datapath runs).
use std::time::{Duration, Instant};

use super::{Run, StandaloneError};
use crate::{
    api::Object,
    cli::{Filter, node_dir},
    features::policy::cli::dump_policy,
};

/// How long a change may take to reach every Node before the step fails (the
/// requirement is 1 s; a loaded machine gets room, the benchmark measures).
const PROGRAMMED_WITHIN: Duration = Duration::from_secs(10);

impl Run {
    /// Replaces an object of the run (admission judges the old against the new). For a
    /// NetworkACL or SecurityGroup, waits until the controller's status names the new
    /// generation as `rulesetVersion` and every Node's `jn_pol_set` holds the set at
    /// that version; returns the time from the write until then. Other kinds: the
    /// daemons' sweep time ([`Run::settle`]).
    pub fn apply(&self, manifest: &serde_json::Value) -> Result<Duration, StandaloneError> {
        let obj = Object::from_value(manifest.clone()).map_err(crate::store::StoreError::from)?;
        let policy = match &obj {
            Object::NetworkACL(o) => {
                Some(("NetworkACL", o.metadata.name.clone().unwrap_or_default()))
            }
            Object::SecurityGroup(o) => {
                Some(("SecurityGroup", o.metadata.name.clone().unwrap_or_default()))
            }
            _ => None,
        };
        let started = Instant::now();
        self.store.update(obj)?;
        let Some((kind, name)) = policy else {
            self.settle();
            return Ok(started.elapsed());
        };
        let deadline = started + PROGRAMMED_WITHIN;
        loop {
            let missing = self.not_programmed(kind, &name);
            let Some(why) = missing else {
                return Ok(started.elapsed());
            };
            if Instant::now() > deadline {
                return Err(StandaloneError::Check(format!(
                    "{kind} {name:?} not in every Node's datapath within {PROGRAMMED_WITHIN:?}: {why}"
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// What keeps the policy object `name` from running everywhere at its generation:
    /// `None` when nothing does.
    fn not_programmed(&self, kind: &str, name: &str) -> Option<String> {
        let (world, _) = self.store.read();
        let o = &world.objects;
        let (generation, id, version) = if kind == "NetworkACL" {
            let a = o
                .network_acls
                .iter()
                .find(|a| a.metadata.name.as_deref() == Some(name))?;
            let s = a.status.clone().unwrap_or_default();
            (a.metadata.generation, s.acl_id, s.ruleset_version)
        } else {
            let g = o
                .security_groups
                .iter()
                .find(|g| g.metadata.name.as_deref() == Some(name))?;
            let s = g.status.clone().unwrap_or_default();
            (g.metadata.generation, s.group_id, s.ruleset_version)
        };
        let want = generation.unwrap_or(1).to_string();
        if version != want {
            return Some(format!(
                "status.rulesetVersion is {version:?}, the spec's generation {want}"
            ));
        }
        let filter = Filter {
            set: Some(id),
            ..Default::default()
        };
        for node in &self.topo.nodes {
            let rows = dump_policy(&node_dir(&node.name), &filter);
            let held = rows
                .as_ref()
                .ok()
                .and_then(|r| r.first())
                .map(|r| r.version.to_string());
            if held.as_deref() != Some(want.as_str()) {
                return Some(format!(
                    "Node {} holds set {id} at version {}",
                    node.name,
                    held.unwrap_or_else(|| "none".into())
                ));
            }
        }
        None
    }
}
