//! What a standalone run killed before its teardown leaves behind, removed by the next
//! run (or `juneau standalone --cleanup`): its namespaces (named `jn-sa-<pid>-...`),
//! its run folder, and the sockets and pins of its Nodes. Only by name, only what a
//! standalone run made, only when the run that made it is dead; never a process.
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where every live run leaves its record.
pub const RECORDS: &str = "/run/juneau/standalone";

/// What a run made, written before it makes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub pid: u32,
    /// The run's number within its process.
    pub seq: u32,
    /// `/proc/<pid>/stat` start time, so that a reused pid is not taken for the run.
    pub start_time: u64,
    pub nodes: Vec<String>,
    pub run_dir: PathBuf,
}

/// The start time (clock ticks after boot) of a live process.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: fields count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

impl Record {
    pub fn path_of(pid: u32, seq: u32) -> PathBuf {
        Path::new(RECORDS).join(format!("{pid}-{seq}.json"))
    }

    pub fn write(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(RECORDS)?;
        std::fs::write(
            Self::path_of(self.pid, self.seq),
            serde_json::to_vec(self).expect("records serialize"),
        )
    }

    pub fn remove(pid: u32, seq: u32) {
        let _ = std::fs::remove_file(Self::path_of(pid, seq));
    }
}

/// Removes `dir` if it is there; what cannot be removed is added to `left`.
fn remove_dir(dir: &std::path::Path, left: &mut Vec<String>) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => left.push(format!("{}: {e}", dir.display())),
    }
}

fn netns_names() -> Vec<String> {
    match std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
    {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(String::from))
            .collect(),
        Ok(o) => {
            tracing::warn!(stderr = %String::from_utf8_lossy(&o.stderr).trim(), "ip netns list failed; no namespace of a dead run is removed");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot run ip netns list; no namespace of a dead run is removed");
            Vec::new()
        }
    }
}

/// The pid in a standalone namespace name `jn-sa-<pid>-...`.
fn run_pid(ns: &str) -> Option<u32> {
    ns.strip_prefix("jn-sa-")?.split('-').next()?.parse().ok()
}

fn delete_netns(name: &str, out: &mut dyn FnMut(String)) {
    let status = std::process::Command::new("ip")
        .args(["netns", "del", name])
        .status();
    let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(name));
    match status {
        Ok(s) if s.success() => out(format!("cleanup: namespace {name} removed")),
        _ => out(format!("cleanup: cannot remove namespace {name}")),
    }
}

/// The Nodes of runs that are alive.
pub fn live_nodes() -> Vec<String> {
    records()
        .into_iter()
        .filter(|r| alive(r.pid, r.start_time))
        .flat_map(|r| r.nodes)
        .collect()
}

fn records() -> Vec<Record> {
    let Ok(dir) = std::fs::read_dir(RECORDS) else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let text = std::fs::read(e.path()).ok()?;
            match serde_json::from_slice::<Record>(&text) {
                Ok(r) => Some(r),
                Err(err) => {
                    tracing::warn!(path = %e.path().display(), error = %err, "unreadable run record left alone");
                    None
                }
            }
        })
        .collect()
}

/// Removes what dead runs left; returns how many runs it cleaned.
pub fn dead_runs(out: &mut dyn FnMut(String)) -> usize {
    let (live, dead): (Vec<Record>, Vec<Record>) = records()
        .into_iter()
        .partition(|r| alive(r.pid, r.start_time));
    let live_nodes: Vec<String> = live.into_iter().flat_map(|r| r.nodes).collect();
    let mut cleaned = 0;
    // A namespace is a dead run's only when no process has its pid: a live process that
    // reuses a dead run's pid may be a run whose namespaces carry the same number.
    for ns in netns_names() {
        if let Some(pid) = run_pid(&ns)
            && start_time(pid).is_none()
        {
            delete_netns(&ns, out);
        }
    }
    for rec in dead {
        let mut left = Vec::new();
        for node in rec.nodes.iter().filter(|n| !live_nodes.contains(n)) {
            let pins = super::pin_dir_of(node);
            if pins.exists() {
                match std::fs::remove_dir_all(&pins) {
                    Ok(()) => out(format!("cleanup: pins {} removed", pins.display())),
                    Err(e) => left.push(format!("pins {}: {e}", pins.display())),
                }
            }
            if let Some(dir) = super::socket_of(node).parent() {
                remove_dir(dir, &mut left);
            }
        }
        remove_dir(&rec.run_dir, &mut left);
        if !left.is_empty() {
            // The record stays, so that the next cleanup finds what is left.
            out(format!(
                "cleanup: run {} (killed) not fully cleaned, left: {}",
                rec.pid,
                left.join("; ")
            ));
            continue;
        }
        Record::remove(rec.pid, rec.seq);
        out(format!("cleanup: run {} (killed) cleaned", rec.pid));
        cleaned += 1;
    }
    cleaned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_traced_back_to_their_run_by_name() {
        assert_eq!(run_pid("jn-sa-1234-node-a"), Some(1234));
        assert_eq!(run_pid("jn-sa-1234-underlay"), Some(1234));
        assert_eq!(run_pid("jn-cl-1234-node-a"), None, "not a standalone run's");
        assert_eq!(run_pid("other"), None);
        let me = std::process::id();
        assert!(start_time(me).is_some());
        assert!(alive(me, start_time(me).unwrap()));
        assert!(
            !alive(me, start_time(me).unwrap() + 1),
            "a reused pid is not the run"
        );
    }
}
