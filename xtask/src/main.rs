//! `cargo xtask <command>`: bootstrap the machine, run the demo, run every test.
//!
//! Everything the README's two commands need is installed here, idempotently and
//! without questions (CI has no standard input): Debian packages, the rust-src
//! component, bpf-linker built against rustc's own LLVM, and a bpffs mount.
use std::{
    env,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use anyhow::{Context, Result, bail};

mod bench;
mod fuzz;

/// Debian packages the tests and the demo run (real tools, real peers).
const PACKAGES: &[&str] = &[
    "iproute2",
    "procps",
    "tcpdump",
    "tshark",
    "iputils-ping",
    "arping",
    "ethtool",
    "bpftool",
    "iperf3",
    "dnsmasq-base",
    "udhcpc",
    "busybox-static",
    "curl",
    // The NAT scenario's outside server (http.server, a UDP echo).
    "python3",
    // The router's clients (issue 12): traceroute, tracepath, nc.
    "traceroute",
    "iputils-tracepath",
    "netcat-openbsd",
    // The end-to-end test's images (a static pause built there) and its tools.
    "gcc",
    "libc6-dev",
    "file",
    "util-linux",
    // runc's seccomp (a kubelet's Pods may ask RuntimeDefault, CoreDNS's do): cgo.
    "libseccomp-dev",
    // The netfilter baseline of the policy benchmark (nft in the bed's namespace).
    "nftables",
    // The Nodes' BGP speaker and the test bed's upstream router (issue 27).
    "bird2",
    "frr",
    // Debian's CNI plugins in /usr/lib/cni (issue 28): the kubelet bed's baseline
    // (bridge + host-local) and Multus' other delegates (bridge, macvlan, static).
    "containernetworking-plugins",
];

/// Services the packages above start on a machine with systemd, in its root
/// namespace: stopped and disabled at once, since the tests run their own, in
/// namespaces.
const SERVICES: &[&str] = &["bird", "frr"];

/// The bpf-linker release known to build here against rustc's LLVM.
const BPF_LINKER_VERSION: &str = "0.13.0";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        // Everything the tests need, the Kubernetes components included (the demo's
        // own bootstrap skips those: it runs on the embedded store).
        Some("bootstrap") => bootstrap().and_then(|()| kubernetes_tools()),
        Some("demo") => bootstrap().and_then(|()| demo(&args[1..])),
        Some("test") => bootstrap()
            .and_then(|()| kubernetes_tools())
            .and_then(|()| test(&args[1..])),
        Some("lint") => lint(),
        Some("fuzz") => fuzz::run_all(),
        Some("bench") if args.get(1).is_some_and(|a| a == "--render") => bench::render_saved(),
        Some("bench") => bootstrap().and_then(|()| bench::bench()),
        _ => {
            eprintln!(
                "usage: cargo xtask <bootstrap | demo | test [filter] | lint | fuzz | bench>\n\
                 \n  bootstrap  install what the build and the tests need (idempotent)\
                 \n  demo       run the standalone demo (or: demo SCENARIO, demo --datapath)\
                 \n  test       run every test: unit, BPF_PROG_TEST_RUN, netns goldens\
                 \n  lint       cargo fmt --check and clippy -D warnings\
                 \n  fuzz       libFuzzer on every target (instrumented build; the suite replays them)\
                 \n  bench      run the benchmarks, write bench/results.json and docs/benchmarks.md"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cargo() -> Command {
    let mut c = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn bootstrap() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc_geteuid() } != 0 {
        bail!("Juneau's tests create network namespaces and load eBPF programs: run as root");
    }
    debian_packages()?;
    rust_src()?;
    bpf_linker()?;
    bpffs()?;
    Ok(())
}

/// etcd, kube-apiserver, kubectl, kube-proxy, kubelet, containerd, crictl, runc, CoreDNS
/// (about 1.5 min of it; the kubelet about 1 min with the others' build cache, 2.5 min
/// without) and Multus' thin plugin (44 s) built from their Go
/// modules (`tools/build.sh`, cached per version under /var/cache/juneau-tools: about
/// 9 minutes on 2 idle cores the first time, with the Debian packages and bpf-linker of
/// `bootstrap`; nothing after). The tests start a real
/// control plane and containerd from them; the demo does not need them.
fn kubernetes_tools() -> Result<()> {
    run(Command::new(root().join("tools/build.sh")).args([
        "k8s",
        "etcd",
        "containerd",
        "crictl",
        "runc",
        "coredns",
        "multus",
    ]))
    .context("building the Kubernetes components (Go and the Go module proxy needed)")
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

fn debian_packages() -> Result<()> {
    let installed =
        output(Command::new("dpkg-query").args(["-W", "-f", "${Package} ${Status}\\n"]))
            .unwrap_or_default();
    let missing: Vec<&str> = PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            !installed
                .lines()
                .any(|l| l.starts_with(&format!("{p} ")) && l.ends_with("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: installing Debian packages: {}", missing.join(" "));
    run(Command::new("apt-get").args(["update", "-qq"]))
        .context("apt-get update failed: are Debian's package registries reachable?")?;
    run(Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing))
    .with_context(|| format!("cannot install {}", missing.join(" ")))?;
    if Path::new("/run/systemd/system").exists() {
        // Best effort: a service that is not there is no failure.
        let _ = Command::new("systemctl")
            .args(["disable", "--now"])
            .args(SERVICES)
            .status();
    }
    Ok(())
}

fn rust_src() -> Result<()> {
    let have = output(Command::new("rustup").args(["component", "list", "--installed"]))?;
    if have.lines().any(|l| l.starts_with("rust-src")) {
        return Ok(());
    }
    eprintln!("xtask: adding the rust-src component (the eBPF build compiles core)");
    run(Command::new("rustup").args(["component", "add", "rust-src"]))
        .context("cannot add rust-src: is the rustup component registry reachable?")
}

/// bpf-linker must link against the LLVM of the rustc that compiles the eBPF crate:
/// derive the `llvm-NN` feature from `rustc -vV` and point LLVM_PREFIX at rustc's own
/// libLLVM.
fn bpf_linker() -> Result<()> {
    let have = Command::new("bpf-linker").arg("--version").output();
    if have.is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    let vv = output(Command::new("rustc").arg("-vV"))?;
    let llvm = vv
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .context("rustc -vV printed no LLVM version")?;
    let major = llvm.split('.').next().unwrap_or_default();
    let sysroot = output(Command::new("rustc").args(["--print", "sysroot"]))?;
    let libdir = Path::new(sysroot.trim()).join("lib");
    let lib = std::fs::read_dir(&libdir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("libLLVM.so.") || (n.starts_with("libLLVM-") && n.ends_with(".so"))
            })
        })
        .with_context(|| {
            format!(
                "no libLLVM in {}: reinstall the Rust toolchain",
                libdir.display()
            )
        })?;
    let prefix = root().join("target/xtask/llvm");
    std::fs::create_dir_all(prefix.join("lib"))?;
    let link = prefix.join("lib/libLLVM.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lib, &link)?;
    eprintln!(
        "xtask: building bpf-linker {BPF_LINKER_VERSION} against rustc's LLVM {llvm} (about a minute)"
    );
    run(Command::new("cargo")
        .env("LLVM_PREFIX", &prefix)
        .args([
            "install",
            "--locked",
            "bpf-linker",
            "--version",
            BPF_LINKER_VERSION,
        ])
        .args([
            "--no-default-features",
            "--features",
            &format!("llvm-{major}"),
        ]))
    .context("cannot build bpf-linker: is crates.io reachable?")
}

fn bpffs() -> Result<()> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    if mounts
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf"))
    {
        return Ok(());
    }
    run(Command::new("mount").args(["-t", "bpf", "bpf", "/sys/fs/bpf"]))
        .context("cannot mount bpffs at /sys/fs/bpf")
}

/// The standalone scenario of the README (the whole stack: store, controller, one
/// daemon per Node namespace, the real CNI binary per Pod); `--datapath` runs the
/// datapath walk-through instead.
fn demo(args: &[String]) -> Result<()> {
    if args.first().is_some_and(|a| a == "--datapath") {
        return run(cargo()
            .args([
                "run",
                "--quiet",
                "-p",
                "juneau-harness",
                "--bin",
                "juneau-demo",
                "--",
            ])
            .args(&args[1..]));
    }
    build_bins(false)?;
    let scenario = args
        .first()
        .cloned()
        .unwrap_or_else(|| "scenarios/stack/l2-demo.yaml".into());
    run(Command::new(root().join("target/debug/juneau"))
        .current_dir(root())
        .args(["standalone", "--once", "--scenario", &scenario]))
}

fn lint() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))
        .context("formatting differs: run `cargo fmt --all`")?;
    run(cargo().args(["clippy", "--all-targets", "--", "-D", "warnings"]))?;
    // The libFuzzer binaries build only with the feature that links libFuzzer.
    run(cargo().args([
        "clippy",
        "-p",
        "juneau-fuzz",
        "--features",
        "libfuzzer",
        "--",
        "-D",
        "warnings",
    ]))?;
    // Nor is the eBPF crate: checked for its own target, as aya-build compiles it
    // (`-Z build-std` on stable, as `build.rs` does).
    run(cargo()
        .current_dir(root().join("ebpf/juneau-ebpf"))
        .env("RUSTC_BOOTSTRAP", "1")
        .args([
            "clippy",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--",
            "-D",
            "warnings",
        ]))
}

/// Every test: lint, unit tests, BPF_PROG_TEST_RUN tests, netns golden tests. Ends
/// with one summary line over all test binaries, so the last line says what ran.
fn test(args: &[String]) -> Result<()> {
    lint()?;
    // The tests run the plugin beside `juneau` (`target/debug/juneau-cni`): another
    // package's binary, which `cargo test` alone does not build.
    run(cargo().args(["build", "--bins"]))?;
    let mut child = cargo()
        .args(["test", "--no-fail-fast"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("cannot start cargo test")?;
    let (mut passed, mut failed, mut ignored) = (0u64, 0u64, 0u64);
    let stdout = child.stdout.take().expect("piped");
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(what), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let n: u64 = n.parse().unwrap_or(0);
                match what {
                    "passed" => passed += n,
                    "failed" => failed += n,
                    "ignored" => ignored += n,
                    _ => {}
                }
            }
        }
    }
    let status = child.wait()?;
    // The fuzz targets ran among the tests (`fuzz/tests/replay.rs`, the normal build);
    // libFuzzer's instrumented build is `cargo xtask fuzz`'s, not the suite's.
    println!("tests: {passed} passed, {failed} failed, {ignored} skipped");
    if !status.success() || failed > 0 {
        bail!("cargo test failed");
    }
    Ok(())
}

/// The binaries a standalone run executes: `juneau` and the `juneau-cni` plugin
/// beside it (another package's).
fn build_bins(release: bool) -> Result<()> {
    let mut c = cargo();
    c.arg("build");
    if release {
        c.arg("--release");
    }
    run(c.args(["--quiet", "-p", "juneau", "-p", "juneau-cni", "--bins"]))
}
