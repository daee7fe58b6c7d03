//! The fuzz targets of `fuzz/` under libFuzzer (cargo fuzz, an instrumented build of
//! the whole tree: about 12 minutes on a fresh 2-core machine), for a bounded number of
//! cases: `cargo xtask fuzz`, run on a schedule. The suite runs the same targets in its
//! normal build instead (`fuzz/tests/replay.rs`). Each run starts from the committed seeds
//! (`fuzz/corpus/<target>`) and the inputs of past findings (`fuzz/regressions/<target>`,
//! each a crash once fixed: run first, so a regression fails at once); what libFuzzer
//! finds new goes to `target/fuzz-corpus/`, never into the tree.
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{cargo, root, run};

/// The targets: the libFuzzer bins of `fuzz/Cargo.toml`, one per parser of untrusted
/// input (the fuzz crate's replay test holds them to its own list, `TARGETS`).
fn targets() -> Result<Vec<String>> {
    let manifest = root().join("fuzz/Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    Ok(bin_names(&text))
}

/// The `name` of every `[[bin]]` table of a manifest.
fn bin_names(manifest: &str) -> Vec<String> {
    let mut in_bin = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(v) = line.strip_prefix("name = ") {
            names.push(v.trim_matches('"').to_owned());
        }
    }
    names
}

/// The bins need the feature that links libFuzzer (the suite builds the library alone).
const FEATURES: [&str; 2] = ["--features", "libfuzzer"];

/// Cases per target under libFuzzer, and a time cap per target: the slowest targets
/// (annotations, frames) run 5,000 to 15,000 cases a second here, the others 100,000+.
const RUNS: u32 = 100_000;
const MAX_SECONDS: u32 = 15;

/// The cargo-fuzz release known to work here (stable rustc with RUSTC_BOOTSTRAP).
const CARGO_FUZZ_VERSION: &str = "0.13.2";

pub fn install() -> Result<()> {
    let have = Command::new("cargo").args(["fuzz", "--version"]).output();
    if have.is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    eprintln!("xtask: installing cargo-fuzz {CARGO_FUZZ_VERSION}");
    run(Command::new("cargo").args([
        "install",
        "--locked",
        "cargo-fuzz",
        "--version",
        CARGO_FUZZ_VERSION,
    ]))
    .context("cannot install cargo-fuzz: is crates.io reachable?")
}

/// Runs every target for [`RUNS`] cases; prints one line per target.
pub fn run_all() -> Result<()> {
    install()?;
    // No sanitizer: ASan needs a nightly std; the targets' checks are their asserts and
    // Rust's own (debug assertions and overflow checks are on).
    run(cargo().args(["fuzz", "build", "-s", "none"]).args(FEATURES))
        .context("building the fuzz targets")?;
    // libFuzzer refuses an artifact prefix whose folder does not exist (a fresh clone).
    let artifacts = root().join("target/fuzz-artifacts");
    std::fs::create_dir_all(&artifacts)
        .with_context(|| format!("cannot create {}", artifacts.display()))?;
    let targets = targets()?;
    let mut failed = Vec::new();
    for t in &targets {
        let scratch = root().join("target/fuzz-corpus").join(t);
        std::fs::create_dir_all(&scratch)?;
        let mut dirs = vec![scratch];
        for kept in ["fuzz/corpus", "fuzz/regressions"] {
            let d = root().join(kept).join(t);
            if d.is_dir() {
                dirs.push(d);
            }
        }
        let out = cargo()
            .args(["fuzz", "run", "-s", "none"])
            .args(FEATURES)
            .arg(t)
            .args(&dirs)
            .args([
                "--",
                &format!("-runs={RUNS}"),
                &format!("-max_total_time={MAX_SECONDS}"),
                "-max_len=4096",
                "-timeout=10",
                &format!("-artifact_prefix={}/", artifacts.display()),
            ])
            .output()
            .with_context(|| format!("cannot run fuzz target {t}"))?;
        let log = String::from_utf8_lossy(&out.stderr);
        let done = log
            .lines()
            .rev()
            .find(|l| l.starts_with("Done "))
            .unwrap_or("no summary");
        println!("fuzz {t}: {done}");
        if !out.status.success() {
            eprintln!("{log}");
            failed.push(t.as_str());
        }
    }
    if !failed.is_empty() {
        bail!(
            "fuzz targets failed: {} (the input is in target/fuzz-artifacts; add it to fuzz/regressions/<target> with the fix)",
            failed.join(", ")
        );
    }
    Ok(())
}
