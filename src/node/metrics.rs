//! The daemon's Prometheus metrics (`GET /metrics`, text exposition format 0.0.4):
//! drops by reason and FDB entries per segment read from the maps at scrape time, CNI
//! requests and ADD latency counted by the agent, program runs from the kernel's
//! statistics (`run_cnt`/`run_time_ns` of each program, non-zero while BPF statistics
//! are on: `juneau node --bpf-stats`).
use std::{collections::BTreeMap, fmt::Write, sync::Mutex, time::Duration};

use super::Dataplane;

/// Upper bounds of the CNI ADD latency histogram, in seconds.
const BUCKETS: [f64; 11] = [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
pub struct Metrics {
    /// (command, "ok" | "error") -> requests.
    cni: Mutex<BTreeMap<(String, &'static str), u64>>,
    add_latency: Mutex<Histogram>,
}

impl Metrics {
    /// Counts one CNI request and, for ADD, its latency.
    pub fn observe_cni(&self, command: &str, ok: bool, took: Duration) {
        let result = if ok { "ok" } else { "error" };
        *self
            .cni
            .lock()
            .expect("metrics lock")
            .entry((command.to_owned(), result))
            .or_default() += 1;
        if command == "ADD" {
            let secs = took.as_secs_f64();
            let mut h = self.add_latency.lock().expect("metrics lock");
            for (i, le) in BUCKETS.iter().enumerate() {
                if secs <= *le {
                    h.counts[i] += 1;
                }
            }
            h.sum += secs;
            h.count += 1;
        }
    }

    /// The exposition text. The dataplane lock is held only to read the counters and
    /// to take handles on the learning tables, which are counted after it is released.
    pub fn render(&self, dataplane: &Mutex<Dataplane>) -> String {
        let (drops, tables, ports, stats) = {
            let dp = dataplane.lock().expect("dataplane lock");
            (
                dp.drops(),
                dp.fdb_tables(),
                dp.ports().len(),
                dp.program_stats(),
            )
        };
        let mut out = String::new();
        out.push_str("# HELP juneau_drops_total Frames dropped by the datapath, by reason.\n");
        out.push_str("# TYPE juneau_drops_total counter\n");
        let mut learn_failures = 0;
        match drops {
            Ok(drops) => {
                for (reason, n) in drops {
                    if reason == juneau_common::DropReason::LearnFailed.name() {
                        learn_failures = n;
                        continue;
                    }
                    let _ = writeln!(out, "juneau_drops_total{{reason=\"{reason}\"}} {n}");
                }
            }
            Err(e) => tracing::warn!(error = %e, "metrics: cannot read the drop counters"),
        }
        out.push_str("# HELP juneau_learn_failures_total Source MACs the learning table refused (the frames were forwarded).\n");
        out.push_str("# TYPE juneau_learn_failures_total counter\n");
        let _ = writeln!(out, "juneau_learn_failures_total {learn_failures}");
        out.push_str("# HELP juneau_fdb_entries Learned MACs per segment on this Node.\n");
        out.push_str("# TYPE juneau_fdb_entries gauge\n");
        for (vni, n) in super::Dataplane::count_entries(tables) {
            let _ = writeln!(out, "juneau_fdb_entries{{vni=\"{vni}\"}} {n}");
        }
        out.push_str("# HELP juneau_ports Datapath ports on this Node.\n");
        out.push_str("# TYPE juneau_ports gauge\n");
        let _ = writeln!(out, "juneau_ports {ports}");
        out.push_str(
            "# HELP juneau_cni_requests_total CNI requests served, by command and result.\n",
        );
        out.push_str("# TYPE juneau_cni_requests_total counter\n");
        for ((cmd, result), n) in self.cni.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "juneau_cni_requests_total{{command=\"{cmd}\",result=\"{result}\"}} {n}"
            );
        }
        out.push_str("# HELP juneau_cni_add_duration_seconds Time to serve a CNI ADD.\n");
        out.push_str("# TYPE juneau_cni_add_duration_seconds histogram\n");
        {
            let h = self.add_latency.lock().expect("metrics lock");
            for (i, le) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "juneau_cni_add_duration_seconds_bucket{{le=\"{le}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "juneau_cni_add_duration_seconds_bucket{{le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(out, "juneau_cni_add_duration_seconds_sum {}", h.sum);
            let _ = writeln!(out, "juneau_cni_add_duration_seconds_count {}", h.count);
        }
        out.push_str("# HELP juneau_program_runs_total Runs of each datapath program (kernel BPF statistics).\n");
        out.push_str("# TYPE juneau_program_runs_total counter\n");
        for (prog, runs, _) in &stats {
            let _ = writeln!(
                out,
                "juneau_program_runs_total{{program=\"{prog}\"}} {runs}"
            );
        }
        out.push_str("# HELP juneau_program_run_seconds_total Time spent in each datapath program (kernel BPF statistics).\n");
        out.push_str("# TYPE juneau_program_run_seconds_total counter\n");
        for (prog, _, ns) in &stats {
            let _ = writeln!(
                out,
                "juneau_program_run_seconds_total{{program=\"{prog}\"}} {}",
                *ns as f64 / 1e9
            );
        }
        out
    }
}

/// One value of a Prometheus text body (`name{labels} value`), for tests and tools.
pub fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_found_by_their_full_series_name() {
        let body = "a_total{x=\"1\"} 3\na_total{x=\"10\"} 7\nb 2.5\n";
        assert_eq!(sample(body, "a_total{x=\"1\"}"), Some(3.0));
        assert_eq!(sample(body, "a_total{x=\"10\"}"), Some(7.0));
        assert_eq!(sample(body, "b"), Some(2.5));
        assert_eq!(sample(body, "c"), None);
    }
}
