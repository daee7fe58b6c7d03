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
