//! A real kubelet on a testbed Node (issue 28): kubelet v1.37.2 built from its module,
//! in the Node's network namespace, on the Node's containerd, registered with the test's
//! API server through a relay on the Node's loopback. Nothing of the machine changes
//! (docs/kubelet-plan.md):
//! - with `protectKernelDefaults: true` the kubelet only reads three machine-wide
//!   settings; it runs in a mount namespace of its own where files holding the values
//!   it expects are bind-mounted over them (no mount here is shared, so the binds stay
//!   there);
//! - its root folder is made a shared mount point of itself first, so the volumes it
//!   mounts there (a projected token is a tmpfs) reach containerd, which runs in the
//!   machine's mount namespace and bind-mounts them into containers;
//! - every path it writes is under the test's folder; its cgroups are under the
//!   Node's containerd fixture's parent, which that fixture removes.
//!
//! Dropping it stops the kubelet (its own child, by PID) and unmounts what it mounted.
#![allow(dead_code)]
use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use super::{
    containerd::Containerd,
    control_plane::{ControlPlane, Owned, tool},
    relay,
};

/// The three settings `protectKernelDefaults` checks, and the values it expects.
const KERNEL_FLAGS: [(&str, &str); 3] = [
    ("vm/overcommit_memory", "1"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
];

/// The DNS Service's ClusterIP every kubelet writes into ClusterFirst Pods'
/// resolv.conf (in the test control plane's Service CIDR, 10.0.0.0/24).
pub const CLUSTER_DNS: &str = "10.0.0.10";

/// The machine's own values of [`KERNEL_FLAGS`], to check that they stay.
pub fn machine_kernel_flags() -> Vec<String> {
    KERNEL_FLAGS
        .iter()
        .map(|(k, _)| {
            std::fs::read_to_string(format!("/proc/sys/{k}"))
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .collect()
}

pub struct Kubelet {
    pub name: String,
    pub dir: PathBuf,
    netns: PathBuf,
    /// The command line after `kubelet` (kept for a restart).
    script: String,
    child: Option<Owned>,
}

impl Kubelet {
    /// Starts the kubelet of Node `name` (address `node_ip`) in `netns`, on `runtime`,
    /// its files under `dir`; returns once the API server has its Node Ready.
    pub fn start(
        cp: &ControlPlane,
        name: &str,
        node_ip: Ipv4Addr,
        netns: &Path,
        runtime: &Containerd,
        dir: &Path,
    ) -> Kubelet {
        let k = Self::start_registered(cp, name, node_ip, netns, runtime, dir);
        k.wait_ready(cp, Duration::from_secs(90));
        k
    }

    /// [`Kubelet::start`] on a runtime that may have no network yet: returns once the
    /// Node is registered (it is Ready only when a CNI configuration appears).
    pub fn start_registered(
        cp: &ControlPlane,
        name: &str,
        node_ip: Ipv4Addr,
        netns: &Path,
        runtime: &Containerd,
        dir: &Path,
    ) -> Kubelet {
        let root = dir.join("root");
        for d in [
            &root,
            &dir.join("logs"),
            &dir.join("plugins"),
            &dir.join("certs"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let flags = dir.join("kernel-flags");
        std::fs::create_dir_all(&flags).unwrap();
        let mut binds = String::new();
        for (key, value) in KERNEL_FLAGS {
            let file = flags.join(key.replace('/', "-"));
            std::fs::write(&file, format!("{value}\n")).unwrap();
            binds.push_str(&format!(
                "mount --bind {} /proc/sys/{key} && ",
                file.display()
            ));
        }
        share_root(dir);
        let cgroup_root = runtime.cgroup_parent();
        make_cgroup_root(&cgroup_root);
        let upstream = cp.server().trim_start_matches("https://").parse().unwrap();
        let port = relay::relay_into(netns, upstream);
        // The Node's own identity (the Node authorizer, NodeRestriction), not admin's.
        let kubeconfig = cp.node_kubeconfig_via(name, &format!("https://127.0.0.1:{port}"));
        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {node_ip}
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
protectKernelDefaults: true
seccompDefault: false
podLogsDir: {logs}
volumePluginDir: {plugins}
readOnlyPort: 0
authentication:
  anonymous: {{enabled: true}}
  webhook: {{enabled: false}}
authorization: {{mode: AlwaysAllow}}
evictionHard: {{memory.available: 1Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ''
clusterDNS: [{CLUSTER_DNS}]
clusterDomain: cluster.local
syncFrequency: 5s
nodeStatusUpdateFrequency: 2s
",
                logs = dir.join("logs").display(),
                plugins = dir.join("plugins").display(),
            ),
        )
        .unwrap();
        let script = format!(
            "{kubelet} --config={config} --kubeconfig={kubeconfig} --root-dir={root} \
             --cert-dir={certs} --hostname-override={name} --node-ip={node_ip} \
             --container-runtime-endpoint=unix://{sock} --v=2",
            kubelet = tool("k8s", "kubelet").display(),
            config = config.display(),
            kubeconfig = kubeconfig.display(),
            root = root.display(),
            certs = dir.join("certs").display(),
            sock = runtime.socket().display(),
        );
        let script = format!("{binds}exec nsenter --net={} {script}", netns.display());
        let mut k = Kubelet {
            name: name.to_owned(),
            dir: dir.to_owned(),
            netns: netns.to_owned(),
            script,
            child: None,
        };
        k.spawn();
        let deadline = Instant::now() + Duration::from_secs(90);
        while !cp.kubectl(&["get", "node", name]).status.success() {
            assert!(
                Instant::now() < deadline,
                "Node {name} did not register:\n{}",
                k.log_tail(40)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        k
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("kubelet.log"))
            .unwrap();
        self.child = Some(Owned::spawn(
            Command::new("unshare")
                .args(["-m", "--propagation", "unchanged", "--", "sh", "-c"])
                .arg(&self.script)
                .stdout(log.try_clone().unwrap())
                .stderr(log),
        ));
    }

    /// Kills the kubelet (SIGKILL, as a crash) and starts it again on the same folder.
    pub fn restart(&mut self, cp: &ControlPlane) {
        drop(self.child.take());
        self.spawn();
        self.wait_ready(cp, Duration::from_secs(90));
    }

    /// Waits until the API server has this Node Ready.
    pub fn wait_ready(&self, cp: &ControlPlane, within: Duration) {
        let deadline = Instant::now() + within;
        let jsonpath = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
        loop {
            let out = cp.kubectl(&["get", "node", &self.name, "-o", jsonpath]);
            if String::from_utf8_lossy(&out.stdout).trim() == "True" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Node {} is not Ready: {}\n{}",
                self.name,
                String::from_utf8_lossy(&out.stderr),
                self.log_tail(40)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("kubelet.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        drop(self.child.take());
        // Its volume mounts (they reached this namespace), deepest first, then the
        // shared root itself.
        let root = self.dir.join("root");
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut ours: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|m| Path::new(m).starts_with(&root))
            .collect();
        ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
        ours.dedup();
        for m in ours {
            let _ = Command::new("umount").args(["-l", m]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Makes the root folder of the kubelet whose files are under `dir` a shared mount
/// point of itself, once: the kubelet's volume mounts then reach containerd. A
/// containerd in a mount namespace of its own must start after this, so that its copy
/// joins the peer group.
pub fn share_root(dir: &Path) {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .any(|m| Path::new(m) == root)
    {
        return;
    }
    run(Command::new("mount").arg("--bind").arg(&root).arg(&root));
    run(Command::new("mount").arg("--make-shared").arg(&root));
}

/// `rel` in the unified hierarchy on a cgroup v2 machine; else in every v1 hierarchy,
/// the cpuset's CPUs and memory nodes copied from the top (a v1 cpuset starts empty,
/// and nothing can join an empty one).
fn make_cgroup_root(rel: &str) {
    let rel = rel.trim_start_matches('/');
    let unified = Path::new("/sys/fs/cgroup");
    if unified.join("cgroup.controllers").exists() {
        let dir = unified.join(rel);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        return;
    }
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let top = h.path();
        if !top.join("cgroup.procs").exists() {
            continue;
        }
        let dir = top.join(rel);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for f in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(v) = std::fs::read_to_string(top.join(f)) {
                let _ = std::fs::write(dir.join(f), v.trim());
            }
        }
    }
}

/// Runs `cmd`; panics with its stderr when it fails.
pub fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
