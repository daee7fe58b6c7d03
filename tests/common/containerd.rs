//! A Node's container runtime for tests: containerd 2.x with its CRI plugin and runc
//! (both built from their Go modules by `tools/build.sh`), started inside a Node's
//! network namespace with a root, state, socket and CNI configuration of its own. Pod
//! sandboxes are made through CRI with crictl, so the CNI plugin is called exactly as
//! on a kubelet's Node. Images are built here (no registry can be reached) and
//! imported into each instance.
//!
//! Dropping it removes its sandboxes (CNI DEL), stops containerd (its own child, by
//! PID), unmounts what it left under its folder and removes the folder.
#![allow(dead_code)]
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

use super::control_plane::{Owned, tool};

pub struct Containerd {
    pub dir: PathBuf,
    /// The Node's network namespace (where containerd and its streaming server live).
    netns: PathBuf,
    child: Option<Owned>,
    /// The Pod namespaces its sandboxes got (`/run/netns/cni-<uuid>`), removed at the
    /// end even when containerd could not remove them.
    pod_netns: std::sync::Mutex<Vec<PathBuf>>,
    /// The Node's own file system view, when it has one ([`Containerd::start_in_view`]).
    view: Option<View>,
}

/// A Node's files as that Node's containerd (and every container it starts) sees
/// them: folder `from` mounted (with what is mounted below it) at `at` in a mount
/// namespace of its own. The Nodes of one machine then share paths but not contents,
/// as hostPath volumes of one DaemonSet expect; the CNI folders are paths in that view.
#[derive(Clone, Debug)]
pub struct View {
    pub from: PathBuf,
    pub at: PathBuf,
    pub cni_bin: PathBuf,
    pub cni_conf: PathBuf,
}

/// The tag both images get.
pub const PAUSE: &str = "localhost/pause:juneau-test";
pub const BUSYBOX: &str = "localhost/busybox:juneau-test";

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[path = "images.rs"]
mod images;
#[allow(unused_imports)] // oci_image: a test that runs an image of its own
pub use images::{oci_image, oci_image_linked, test_images};

impl Containerd {
    /// Starts containerd in `netns` with its files under `dir`, the CNI plugin `cni_bin`
    /// in its plugin folder and `conflist` as its only network; imports `images`.
    pub fn start(
        dir: &Path,
        netns: &Path,
        cni_bin: &Path,
        conflist: &str,
        images: &[&Path],
    ) -> Containerd {
        Self::start_with(
            dir,
            netns,
            &[("juneau-cni", cni_bin)],
            &[("10-juneau.conflist", conflist)],
            images,
        )
    }

    /// [`Containerd::start`] with the CNI plugins `plugins` (name in its plugin
    /// folder, binary) and the network files `confs` (name, text: the first by name is
    /// the one the CRI uses, as on a kubelet's Node).
    pub fn start_with(
        dir: &Path,
        netns: &Path,
        plugins: &[(&str, &Path)],
        confs: &[(&str, &str)],
        images: &[&Path],
    ) -> Containerd {
        Self::start_full(dir, netns, plugins, confs, images, None)
    }

    /// Containerd with no CNI configuration yet, in the Node's own [`View`]: a
    /// DaemonSet installs the plugin and its conflist into `view.cni_bin` and
    /// `view.cni_conf` (until then the Node is not Ready).
    pub fn start_in_view(dir: &Path, netns: &Path, view: View, images: &[&Path]) -> Containerd {
        Self::start_full(dir, netns, &[], &[], images, Some(view))
    }

    fn start_full(
        dir: &Path,
        netns: &Path,
        plugins: &[(&str, &Path)],
        confs: &[(&str, &str)],
        images: &[&Path],
        view: Option<View>,
    ) -> Containerd {
        let (bin_dir, conf_dir) = match &view {
            Some(v) => (v.cni_bin.clone(), v.cni_conf.clone()),
            None => (dir.join("cni-bin"), dir.join("cni-conf")),
        };
        std::fs::create_dir_all(dir).unwrap();
        if view.is_none() {
            std::fs::create_dir_all(&bin_dir).unwrap();
            std::fs::create_dir_all(&conf_dir).unwrap();
        }
        for (name, bin) in plugins {
            std::os::unix::fs::symlink(bin, bin_dir.join(name)).unwrap();
        }
        for (name, text) in confs {
            std::fs::write(conf_dir.join(name), text).unwrap();
        }
        let sock = dir.join("containerd.sock");
        let runc = tool("runc", "runc");
        // Keys as containerd 2.x reads them (v4 layout; the 1.x `io.containerd.grpc.v1.cri`
        // runtime keys would be ignored silently). restrict_oom_score_adj: these machines
        // refuse negative OOM scores (no CAP_SYS_RESOURCE), so sandboxes keep ours.
        let config = format!(
            r#"version = 4
root = '{root}'
state = '{state}'
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{PAUSE}'
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '{runc}'
        Root = '{runc_root}'
        SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{bin}']
      conf_dir = '{conf}'
      use_internal_loopback = true
  [plugins.'io.containerd.server.v1.grpc']
    address = '{sock}'
  [plugins.'io.containerd.server.v1.ttrpc']
    address = '{sock}.ttrpc'
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
"#,
            root = dir.join("root").display(),
            state = dir.join("state").display(),
            runc = runc.display(),
            runc_root = dir.join("runc").display(),
            bin = bin_dir.display(),
            conf = conf_dir.display(),
            sock = sock.display(),
        );
        std::fs::write(dir.join("config.toml"), config).unwrap();
        std::fs::write(
            dir.join("crictl.yaml"),
            format!(
                "runtime-endpoint: unix://{s}\nimage-endpoint: unix://{s}\ntimeout: 60\n",
                s = sock.display()
            ),
        )
        .unwrap();
        let mut c = Containerd {
            dir: dir.to_owned(),
            netns: netns.to_owned(),
            child: None,
            pod_netns: std::sync::Mutex::new(Vec::new()),
            view,
        };
        c.spawn();
        for image in images {
            c.import(image);
        }
        c
    }

    /// Imports an image archive (`images::oci_image`) for the CRI.
    pub fn import(&self, image: &Path) {
        run(Command::new(tool("containerd", "ctr"))
            .args(["-n", "k8s.io", "-a"])
            .arg(self.socket())
            .args(["images", "import"])
            .arg(image));
    }

    /// Starts containerd on its configuration and waits until it serves CRI.
    fn spawn(&mut self) {
        let containerd = tool("containerd", "containerd");
        let path = format!(
            "{}:{}",
            containerd.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // nsenter --net only: containerd stays in the machine's mount namespace, so the
        // Pod namespaces it mounts under /run/netns are visible to the daemon.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("containerd.log"))
            .unwrap();
        let mut cmd = match &self.view {
            None => Command::new("nsenter"),
            // Its own mount namespace, every mount of the machine's kept in its peer
            // group (`unchanged`): the Pod namespaces under /run/netns and the
            // kubelet's volumes still reach it, and the Node's folder is bound over
            // `at` there alone.
            Some(v) => {
                let mut c = Command::new("unshare");
                c.args(["-m", "--propagation", "unchanged", "--", "sh", "-c"])
                    .arg(format!(
                        "mount --rbind {} {} && exec nsenter \"$@\"",
                        v.from.display(),
                        v.at.display()
                    ))
                    .arg("sh");
                c
            }
        };
        self.child = Some(Owned::spawn(
            cmd.arg(format!("--net={}", self.netns.display()))
                .arg(&containerd)
                .arg("-c")
                .arg(self.dir.join("config.toml"))
                .env("PATH", path)
                .stdout(log.try_clone().unwrap())
                .stderr(log),
        ));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.crictl(&["version"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "containerd did not serve CRI: {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills containerd (SIGKILL, as a crash; its shims and their containers go on)
    /// and starts it again on the same state.
    pub fn restart(&mut self) {
        drop(self.child.take());
        self.spawn();
    }

    /// Its CNI plugin folder (a meta-plugin's `binDir`).
    pub fn cni_bin_dir(&self) -> PathBuf {
        self.dir.join("cni-bin")
    }

    /// Its CRI socket (a kubelet's `--container-runtime-endpoint`).
    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    /// `/juneau-test-<folder name>`: where this instance's sandboxes get their cgroups
    /// (a kubelet on it takes it as its `cgroupRoot`).
    pub fn cgroup_parent(&self) -> String {
        format!(
            "/juneau-test-{}-{}",
            std::process::id(),
            self.dir.file_name().unwrap().to_string_lossy()
        )
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// crictl against this instance, run inside the Node's namespace (exec and attach
    /// stream from containerd's server on the Node's loopback).
    pub fn crictl(&self, args: &[&str]) -> Output {
        Command::new("nsenter")
            .arg(format!("--net={}", self.netns.display()))
            .arg(tool("crictl", "crictl"))
            .arg("--config")
            .arg(self.dir.join("crictl.yaml"))
            .args(args)
            .output()
            .expect("run crictl")
    }

    /// crictl that must succeed; its trimmed stdout.
    pub fn crictl_ok(&self, args: &[&str]) -> String {
        let out = self.crictl(args);
        assert!(
            out.status.success(),
            "crictl {args:?}: {}\ncontainerd: {}",
            String::from_utf8_lossy(&out.stderr),
            self.log_tail()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Busybox's `args` in container `ctr`: whether it succeeded, and what it printed
    /// (stdout, then stderr).
    pub fn busybox(&self, ctr: &str, args: &[&str]) -> (bool, String) {
        let argv: Vec<&str> = ["exec", ctr, "/bin/busybox"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let out = self.crictl(&argv);
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// Three pings from container `ctr` to `target`; asserts every one is answered.
    pub fn assert_pings(&self, ctr: &str, target: &str) {
        let (_, out) = self.busybox(ctr, &["ping", "-c", "3", "-W", "2", target]);
        assert!(
            out.contains("3 packets transmitted, 3 packets received"),
            "{ctr} -> {target}: {out}"
        );
    }

    /// A Pod sandbox for the Kubernetes Pod `namespace/name` (uid as the API gave it):
    /// the CNI ADD happens here. Returns the sandbox id.
    pub fn run_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<String, String> {
        let spec = self.dir.join(format!("pod-{name}.json"));
        std::fs::write(
            &spec,
            serde_json::to_vec(&serde_json::json!({
                "metadata": {"name": name, "namespace": namespace, "uid": uid, "attempt": 1},
                "log_directory": self.dir.join(format!("logs/{name}")),
                // Cgroups of this instance only, removed with it.
                "linux": {"cgroup_parent": self.cgroup_parent()},
            }))
            .unwrap(),
        )
        .unwrap();
        let out = self.crictl(&["runp", spec.to_str().unwrap()]);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let (netns, _) = self.pod_network(&id);
        self.pod_netns.lock().unwrap().push(netns);
        Ok(id)
    }

    /// Starts a busybox container in sandbox `pod`; returns the container id.
    pub fn run_busybox(&self, pod: &str, name: &str) -> String {
        let pod_spec = self.dir.join(format!("pod-{name}.json"));
        let spec = self.dir.join(format!("ctr-{name}.json"));
        std::fs::write(
            &spec,
            serde_json::to_vec(&serde_json::json!({
                "metadata": {"name": "c"},
                "image": {"image": BUSYBOX},
                "command": ["/bin/busybox", "sleep", "3600"],
                "log_path": "c.log",
                "linux": {},
            }))
            .unwrap(),
        )
        .unwrap();
        let id = self.crictl_ok(&[
            "create",
            pod,
            spec.to_str().unwrap(),
            pod_spec.to_str().unwrap(),
        ]);
        self.crictl_ok(&["start", &id]);
        id
    }

    /// The network namespace path and IP the runtime recorded for sandbox `pod`.
    pub fn pod_network(&self, pod: &str) -> (PathBuf, String) {
        let v: serde_json::Value =
            serde_json::from_str(&self.crictl_ok(&["inspectp", "-o", "json", pod])).unwrap();
        let ns = v["info"]["runtimeSpec"]["linux"]["namespaces"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["type"] == "network"))
            .and_then(|n| n["path"].as_str())
            .unwrap_or_else(|| panic!("no network namespace in {v}"));
        let ip = v["status"]["network"]["ip"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        (PathBuf::from(ns), ip)
    }

    /// Stops and removes sandbox `pod` (the CNI DEL happens at stop).
    pub fn remove_pod(&self, pod: &str) {
        self.crictl_ok(&["stopp", pod]);
        self.crictl_ok(&["rmp", pod]);
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // Every sandbox goes through CNI DEL before containerd stops.
        let _ = self.crictl(&["rmp", "-a", "-f"]);
        drop(self.child.take());
        // What outlives a containerd that could not clean up (a DEL that failed, a
        // panic midway): its shims (they name its socket), the processes in its
        // sandboxes' cgroups, the Pod namespaces it mounted. All of them started by it.
        let sock = self.dir.join("containerd.sock");
        for pid in processes_naming(&sock) {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        let parent = self.cgroup_parent();
        let cgroups = cgroup_dirs(&parent);
        for dir in &cgroups {
            for pid in std::fs::read_to_string(dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok())
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for ns in self.pod_netns.lock().unwrap().drain(..) {
            if ns.exists() {
                let _ = Command::new("umount").arg("-l").arg(&ns).status();
                let _ = std::fs::remove_file(&ns);
            }
        }
        // Mounts left under its folder (an overlay of a container killed with it),
        // deepest first, then the folder.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut ours: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|m| Path::new(m).starts_with(&self.dir))
            .collect();
        ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in ours {
            let _ = Command::new("umount").args(["-l", m]).status();
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("containerd: cannot remove {}: {e}", self.dir.display());
        }
        // The cgroups runc made under our parent, deepest first (empty by now).
        let deadline = Instant::now() + Duration::from_secs(5);
        for dir in cgroups.iter().rev() {
            while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Processes whose command line names `path` (the shims of one containerd).
fn processes_naming(path: &Path) -> Vec<nix::unistd::Pid> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains("containerd-shim") && cmd.contains(&needle))
                .then_some(nix::unistd::Pid::from_raw(pid))
        })
        .collect()
}

/// `parent` and every cgroup below it, parents first, in every v1 hierarchy and in the
/// unified one.
fn cgroup_dirs(parent: &str) -> Vec<PathBuf> {
    let rel = parent.trim_start_matches('/');
    let mut tops = vec![Path::new("/sys/fs/cgroup").join(rel)];
    tops.extend(
        std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
            .map(|h| h.path().join(rel)),
    );
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = tops.into_iter().filter(|t| t.is_dir()).collect();
    while let Some(d) = stack.pop() {
        stack.extend(
            std::fs::read_dir(&d)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir()),
        );
        out.push(d);
    }
    out
}
