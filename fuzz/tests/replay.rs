//! Every fuzz target in the normal build: its committed seeds (`fuzz/corpus/<target>`),
//! its past findings (`fuzz/regressions/<target>`, run first so a regression fails at
//! once), then a bounded number of inputs made from them by a seeded generator (bit
//! flips, byte changes, cuts, splices, random bytes). Not coverage guided; that is
//! `cargo xtask fuzz`, libFuzzer on an instrumented build, run on a schedule. This
//! keeps the suite from paying for that build while every parser still meets inputs
//! it was not written for. A failing input is written to `target/fuzz-artifacts/`.
//! The two typed targets (`annotations`, `cni_invocation`) also get valid inputs and
//! their mutations directly (the second test).
use std::{panic, path::PathBuf};

use juneau_fuzz::{
    TARGETS,
    targets::{CniInput, annotations_with, cni_invocation_with},
};

/// Generated inputs per target (with the seed fixed, the same ones every run).
const GENERATED: usize = 25_000;
const MAX_LEN: usize = 4096;

/// xorshift64*: reproducible, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: PathBuf) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable entry").path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = if seeds.is_empty() || rng.below(8) == 0 {
        (0..rng.below(256)).map(|_| rng.next() as u8).collect()
    } else {
        seeds[rng.below(seeds.len())].clone()
    };
    for _ in 0..=rng.below(6) {
        let at = rng.below(v.len() + 1);
        let last = v.len().saturating_sub(1);
        match rng.below(6) {
            0 if !v.is_empty() => v[at.min(last)] ^= 1 << rng.below(8),
            1 if !v.is_empty() => v[at.min(last)] = rng.next() as u8,
            2 => v.insert(at, [0, 0xff, b'"', b'{', b'\n', b':'][rng.below(6)]),
            3 if at < v.len() => {
                v.remove(at);
            }
            4 => v.truncate(at),
            _ if !seeds.is_empty() => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                v.splice(at..at, other[from..].iter().copied().take(64));
            }
            _ => {}
        }
    }
    v.truncate(MAX_LEN);
    v
}

#[test]
fn fuzz_targets_answer_their_corpus_past_findings_and_generated_inputs() {
    let artifacts = root().join("../target/fuzz-artifacts");
    let mut failed = Vec::new();
    for (name, run) in TARGETS {
        let regressions = files(root().join("regressions").join(name));
        let seeds = files(root().join("corpus").join(name));
        // The typed targets' valid inputs are in the test below (no person writes
        // arbitrary's byte encoding); every other target starts from committed seeds.
        assert!(
            !seeds.is_empty() || ["annotations", "cni_invocation"].contains(name),
            "fuzz/corpus/{name} holds no seed"
        );
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        let generated = (0..GENERATED).map(|_| mutate(&mut rng, &seeds));
        let inputs = regressions.iter().chain(&seeds).cloned().chain(generated);
        let mut ran = 0;
        for input in inputs {
            ran += 1;
            if panic::catch_unwind(|| run(&input)).is_err() {
                std::fs::create_dir_all(&artifacts).expect("the artifacts folder");
                let path = artifacts.join(format!("{name}-{ran}"));
                std::fs::write(&path, &input).expect("the failing input written");
                failed.push(format!("{name}: {}", path.display()));
                break;
            }
        }
        eprintln!(
            "fuzz {name}: {ran} inputs ({} past findings, {} seeds)",
            regressions.len(),
            seeds.len()
        );
    }
    assert!(
        failed.is_empty(),
        "targets panicked (add the input to fuzz/regressions/<target> with the fix): {failed:?}"
    );
}

/// Valid inputs of the two typed targets, as a tenant or a runtime writes them.
const NETWORKS: &[&str] = &[
    r#"[{"interface":"eth0","l2Network":"lab"}]"#,
    r#"[{"interface":"eth0","subnet":"web","address":"10.1.0.9"}]"#,
    r#"[{"interface":"eth0","l2Network":"lab"},{"interface":"eth1","subnet":"web","securityGroups":["a","b"]}]"#,
    r#"[{"interface":"eth0","elasticIP":"pub-1"}]"#,
];
const CONFIG: &str = r#"{"cniVersion":"1.1.0","name":"juneau","type":"juneau-cni","socket":"/run/juneau/n1/cni.sock"}"#;
const ARGS: &str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0";

/// The typed targets have no byte seeds a person can write (arbitrary's encoding):
/// they get valid inputs and mutations of them, byte for byte, instead.
#[test]
fn fuzz_typed_targets_answer_mutated_valid_inputs() {
    let text = |v: Vec<u8>| String::from_utf8_lossy(&v).into_owned();
    let mut rng = Rng(0x51ed_270b_2719_7e1d);
    let networks: Vec<Vec<u8>> = NETWORKS.iter().map(|n| n.as_bytes().to_vec()).collect();
    let configs = vec![CONFIG.as_bytes().to_vec()];
    let args = vec![ARGS.as_bytes().to_vec()];
    let mut failed = Vec::new();
    for n in 0..GENERATED {
        // The valid inputs first, then mutations.
        let pick = |rng: &mut Rng, seeds: &[Vec<u8>]| {
            if n < seeds.len() {
                seeds[n].clone()
            } else {
                mutate(rng, seeds)
            }
        };
        let (nets, skip) = (text(pick(&mut rng, &networks)), text(mutate(&mut rng, &[])));
        let run = panic::catch_unwind(|| annotations_with(nets.clone(), skip.clone(), Vec::new()));
        if run.is_err() {
            failed.push(format!(
                "annotations: networks {nets:?}, dns-inject-skip {skip:?}"
            ));
            break;
        }
        let input = CniInput {
            command: rng.next() as u8,
            container_id: text(mutate(&mut rng, &[b"0123456789abcdef".to_vec()])),
            netns: "/var/run/netns/cni-1".into(),
            ifname: "eth0".into(),
            args: text(pick(&mut rng, &args)),
            stdin: text(pick(&mut rng, &configs)),
        };
        if panic::catch_unwind(|| cni_invocation_with(&input)).is_err() {
            failed.push(format!("cni_invocation: {input:?}"));
            break;
        }
    }
    assert!(failed.is_empty(), "targets panicked: {failed:?}");
}

/// `cargo xtask fuzz` runs the bins of `fuzz/Cargo.toml`; each is one of [`TARGETS`],
/// and every target has its bin, so libFuzzer and the suite run the same set.
#[test]
fn fuzz_every_target_has_its_libfuzzer_bin_and_no_other() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let bins = manifest.matches("[[bin]]").count();
    assert_eq!(bins, TARGETS.len(), "bins in fuzz/Cargo.toml");
    for (name, _) in TARGETS {
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "fuzz/Cargo.toml has no bin for {name}"
        );
    }
}
