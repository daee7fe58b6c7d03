//! The kubelet testbed (issue 28): the API server with Juneau's CRDs, the controller,
//! and on every Node its daemon, containerd and a real kubelet (`kubelet.rs`); with
//! Juneau as the Nodes' network, or Multus' thin plugin delegating to it (the cluster
//! network) and to NetworkAttachmentDefinitions' plugins (Debian's
//! containernetworking-plugins).
#![allow(dead_code)]
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use juneau::standalone::topology::Topology;

use crate::{
    containerd::{self, Containerd},
    control_plane::{self, ControlPlane, Owned, tool},
    kubelet::Kubelet,
    node_bed::{NodeDaemon, TestDir, as_account, start_node, wait_for},
    relay, webhook,
};

pub const NODES: [&str; 2] = ["node-a", "node-b"];

/// The Nodes' network configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cni {
    /// Juneau's conflist alone.
    Juneau,
    /// Multus' thin plugin first, Juneau its cluster network.
    MultusOverJuneau,
    /// The baseline: Debian's `bridge` with `host-local` (a /24 per Node), no Juneau.
    Bridge,
    /// The ceiling: `jn-bare-cni` (a veth pair, an address, a default route; nothing
    /// else), no Juneau.
    Bare,
}

/// The CNI plugin `binary` behind a wrapper that appends `<CNI_COMMAND> <ms> <start,
/// ns since the epoch>` for each call to `<dir>/cni-times.log`: every bed's plugin timed the same way, as
/// containerd runs it (its process included); the wrapper's two `date` calls are its
/// only addition.
pub fn timed_plugin(dir: &Path, binary: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let name = binary.file_name().unwrap().to_string_lossy();
    let wrapper = dir.join(format!("timed-{name}"));
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ns=$(date +%s%N)\n{binary}\nrc=$?\ne=$(date +%s%N)\n\
             echo \"$CNI_COMMAND $(( (e - s) / 1000000 )) $s\" >> {log}\nexit $rc\n",
            binary = binary.display(),
            log = dir.join("cni-times.log").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// A Node's containerd with `plugins` and the one network file `conf`.
fn start_runtime(
    dir: &Path,
    netns: &Path,
    plugins: &[(&str, PathBuf)],
    conf: (&str, &str),
    images: [&Path; 2],
) -> Containerd {
    let plugins: Vec<(&str, &Path)> = plugins.iter().map(|(n, p)| (*n, p.as_path())).collect();
    Containerd::start_with(dir, netns, &plugins, &[conf], &images)
}

/// Debian's plugins a NetworkAttachmentDefinition may name.
const DEBIAN_PLUGINS: [&str; 4] = ["bridge", "macvlan", "host-local", "static"];

/// Multus on a Node: its plugin folder's entries and its configuration (thin mode:
/// it reads the Pod and its NetworkAttachmentDefinitions through the API server, by a
/// relay into the Node's namespace, and calls the delegates itself).
fn multus(
    cp: &ControlPlane,
    rt_dir: &Path,
    netns: &Path,
    juneau_cni: &Path,
    juneau: serde_json::Value,
) -> (Vec<(&'static str, PathBuf)>, String) {
    let mut plugins = vec![
        ("juneau-cni", juneau_cni.to_owned()),
        ("multus", tool("multus", "multus")),
    ];
    for p in DEBIAN_PLUGINS {
        plugins.push((p, Path::new("/usr/lib/cni").join(p)));
    }
    let upstream = cp.server().trim_start_matches("https://").parse().unwrap();
    let port = relay::relay_into(netns, upstream);
    let name = rt_dir.file_name().unwrap().to_string_lossy().into_owned();
    let kubeconfig = cp.kubeconfig_via(
        &format!("multus-{name}"),
        &format!("https://127.0.0.1:{port}"),
    );
    std::fs::create_dir_all(rt_dir.join("multus")).unwrap();
    let conf = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "multus",
        "kubeconfig": kubeconfig,
        "binDir": rt_dir.join("cni-bin"),
        "cniDir": rt_dir.join("multus/cache"),
        "logFile": rt_dir.join("multus/multus.log"),
        "logLevel": "verbose",
        "delegates": [juneau],
    });
    (plugins, conf.to_string())
}

/// Vpc tenant-a and its L2Network lab-net (10.71.0.0/24).
pub const LAB_NET: &str = "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n---\n\
     apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: lab-net}\n\
     spec: {vpc: tenant-a, cidr: 10.71.0.0/24}\n";

/// The NetworkAttachmentDefinition kind (k8s.cni.cncf.io/v1), as Multus' deployment
/// defines it: a namespaced object whose `spec.config` is a CNI configuration.
pub const NAD_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: network-attachment-definitions.k8s.cni.cncf.io
spec:
  group: k8s.cni.cncf.io
  scope: Namespaced
  names:
    plural: network-attachment-definitions
    singular: network-attachment-definition
    kind: NetworkAttachmentDefinition
    shortNames: [net-attach-def]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              config: {type: string}
";

/// The testbed: the API server with Juneau's CRDs and `objects`, the controller, and
/// on every Node its daemon, containerd (Juneau's conflist) and kubelet. Dropped in
/// the order a cluster stops: kubelets first (they would make sandboxes again), then
/// the runtimes (their sandboxes' DEL needs the daemons), the daemons, the Nodes, the
/// controller, the API server; the folder last.
pub struct Bed {
    pub kubelets: Vec<Kubelet>,
    pub runtimes: Vec<Containerd>,
    pub daemons: Vec<NodeDaemon>,
    pub topo: Topology,
    pub webhook: Option<webhook::Webhook>,
    _controller: Option<Owned>,
    pub cp: ControlPlane,
    _dir: TestDir,
}

impl Bed {
    pub fn start(objects: &str) -> Bed {
        Self::start_with(objects, Cni::Juneau)
    }

    /// [`Bed::start`] with `cni` as the Nodes' network configuration.
    pub fn start_with(objects: &str, cni: Cni) -> Bed {
        Self::start_full(objects, cni, &[])
    }

    /// [`Bed::start`] with Juneau's admission webhook registered, run with
    /// `webhook_flags` (e.g. `--enable-probe-rewrite`).
    pub fn start_with_webhook(objects: &str, webhook_flags: &[&str]) -> Bed {
        Self::start_full(objects, Cni::Juneau, webhook_flags)
    }

    fn start_full(objects: &str, cni: Cni, webhook_flags: &[&str]) -> Bed {
        let cp = ControlPlane::start_audited(&[]);
        cp.install_crds_and(&["namespace.yaml", "rbac.yaml"]);
        let dir = TestDir::new(std::env::temp_dir().join(format!(
            "juneau-kl-{}-{}",
            std::process::id(),
            free()
        )));
        if !objects.trim().is_empty() {
            cp.apply_ok(objects);
        }
        // The baseline's Nodes run neither Juneau's controller nor its daemons.
        let juneau_on = !matches!(cni, Cni::Bridge | Cni::Bare);
        let controller = juneau_on.then(|| {
            let ctl_kubeconfig =
                cp.kubeconfig_for_token("juneau-controller", &as_account(&cp, "juneau-controller"));
            Owned::spawn(
                Command::new(juneau::standalone::sibling_binary("juneau"))
                    .args(["controller", "--lease-namespace", "juneau-system"])
                    .arg("--kubeconfig")
                    .arg(&ctl_kubeconfig)
                    .stderr(std::fs::File::create(dir.0.join("controller.log")).unwrap()),
            )
        });
        let webhook = (cni == Cni::Juneau && !webhook_flags.is_empty())
            .then(|| webhook::start(&cp, &dir.0.join("webhook"), webhook_flags));
        let names: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
        let topo = Topology::new(&format!("jn-kl{}", free()), &names).unwrap();
        let daemons: Vec<NodeDaemon> = NODES
            .iter()
            .filter(|_| juneau_on)
            .map(|n| start_node(&cp, &topo, n, &dir.0, "juneau-kl"))
            .collect();
        let (pause, busybox) = containerd::test_images(&dir.0.join("images"));
        let runtimes: Vec<Containerd> = NODES
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let rt_dir = dir.0.join(format!("containerd-{node}"));
                let ns = node_of(&topo, node).ns.path();
                let socket = daemons.get(i).map(|d| d.socket.clone()).unwrap_or_default();
                let juneau = serde_json::json!({
                    "cniVersion": "1.1.0", "name": "juneau",
                    "plugins": [{"type": "juneau-cni", "socket": socket}],
                });
                let juneau_cni = juneau::standalone::sibling_binary("juneau-cni");
                match cni {
                    Cni::Bridge => {
                        let conf = serde_json::json!({
                            "cniVersion": "1.0.0", "name": "bridge-net",
                            "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": true,
                                "ipMasq": false, "ipam": {"type": "host-local",
                                "dataDir": rt_dir.join("ipam"),
                                "ranges": [[{"subnet": format!("10.88.{i}.0/24")}]]}}],
                        });
                        let plugins: Vec<(&str, PathBuf)> = vec![
                            (
                                "bridge",
                                timed_plugin(&rt_dir, Path::new("/usr/lib/cni/bridge")),
                            ),
                            (
                                "host-local",
                                Path::new("/usr/lib/cni/host-local").to_owned(),
                            ),
                        ];
                        let conf = conf.to_string();
                        start_runtime(
                            &rt_dir,
                            ns,
                            &plugins,
                            ("10-bridge.conflist", &conf),
                            [&pause, &busybox],
                        )
                    }
                    Cni::Bare => {
                        let bare = juneau::standalone::sibling_binary("jn-bare-cni");
                        let conf = serde_json::json!({
                            "cniVersion": "1.0.0", "name": "bare-net",
                            "plugins": [{"type": "jn-bare-cni"}],
                        })
                        .to_string();
                        start_runtime(
                            &rt_dir,
                            ns,
                            &[("jn-bare-cni", timed_plugin(&rt_dir, &bare))],
                            ("10-bare.conflist", &conf),
                            [&pause, &busybox],
                        )
                    }
                    Cni::Juneau => Containerd::start(
                        &rt_dir,
                        ns,
                        &timed_plugin(&rt_dir, &juneau_cni),
                        &juneau.to_string(),
                        &[&pause, &busybox],
                    ),
                    Cni::MultusOverJuneau => {
                        let (plugins, conf) = multus(&cp, &rt_dir, ns, &juneau_cni, juneau);
                        start_runtime(
                            &rt_dir,
                            ns,
                            &plugins,
                            ("00-multus.conf", &conf),
                            [&pause, &busybox],
                        )
                    }
                }
            })
            .collect();
        let kubelets = start_kubelets(&cp, &topo, &runtimes, &dir.0, true);
        Bed {
            kubelets,
            runtimes,
            daemons,
            topo,
            webhook,
            _controller: controller,
            cp,
            _dir: dir,
        }
    }

    /// The processes of Juneau's own components here: the controller and the daemons.
    pub fn juneau_pids(&self) -> Vec<u32> {
        let ctl = self._controller.as_ref().map(|c| c.0.id());
        ctl.into_iter()
            .chain(self.daemons.iter().filter_map(NodeDaemon::pid))
            .collect()
    }

    pub fn apply(&self, yaml: &str) {
        self.cp.apply_ok(yaml);
    }

    /// The Pods, node-a's kubelet and daemon: what a failed wait shows.
    pub fn describe(&self) -> String {
        format!(
            "{}\nkubelet node-a:\n{}\ndaemon node-a:\n{}",
            self.cp
                .kubectl_ok(&["get", "pods", "-n", "default", "-o", "wide"]),
            self.kubelets[0].log_tail(30),
            std::fs::read_to_string(&self.daemons[0].log).unwrap_or_default()
        )
    }

    /// Pod `name`'s `status.podIPs` once it is Ready.
    pub fn wait_ready(&self, name: &str) -> Vec<String> {
        wait_for(
            Duration::from_secs(90),
            || self.describe(),
            || ready_ips(&self.cp, name),
        )
    }

    /// The juneau veths in Node `node`'s namespace (host ends with the owner alias).
    pub fn veths(&self, node: &str) -> usize {
        let out = Command::new("ip")
            .args([
                "-n",
                node_of(&self.topo, node).ns.name(),
                "-o",
                "link",
                "show",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(juneau::node::veth::OWNER_ALIAS))
            .count()
    }

    /// The daemon log lines of CNI `command`s served for `pod`.
    pub fn served(&self, n: usize, command: &str, pod: &str) -> usize {
        std::fs::read_to_string(&self.daemons[n].log)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                l.contains("CNI request served")
                    && l.contains(&format!("command={command}"))
                    && l.contains(pod)
            })
            .count()
    }
}

/// A kubelet on every Node, on that Node's runtime, files under `dir/kubelet-<node>`;
/// returns once each Node is Ready (`ready`) or only registered.
pub fn start_kubelets(
    cp: &ControlPlane,
    topo: &Topology,
    runtimes: &[Containerd],
    dir: &Path,
    ready: bool,
) -> Vec<Kubelet> {
    NODES
        .iter()
        .zip(runtimes)
        .map(|(node, rt)| {
            let t = node_of(topo, node);
            let start = if ready {
                Kubelet::start
            } else {
                Kubelet::start_registered
            };
            start(
                cp,
                node,
                t.ip,
                t.ns.path(),
                rt,
                &dir.join(format!("kubelet-{node}")),
            )
        })
        .collect()
}

/// Three pings from Pod `pod`'s container on `rt` to `target`; asserts every one
/// is answered.
pub fn assert_pings(rt: &Containerd, pod: &str, target: &str) {
    rt.assert_pings(&container_of(rt, pod), target);
}

/// The interfaces of Node `node` that carry one of Juneau's programs, by
/// `kubectl juneau attachments` (MX-02, MX-03); and its rows, for a message.
pub fn with_programs(topo: &Topology, node: &str) -> (Vec<String>, serde_json::Value) {
    let shown = Command::new(juneau::standalone::sibling_binary("kubectl-juneau"))
        .args(["attachments", "--netns"])
        .arg(node_of(topo, node).ns.path())
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let with: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["program"].as_str().is_some_and(|p| !p.is_empty()))
        .filter_map(|r| r["interface"].as_str().map(str::to_owned))
        .collect();
    (with, rows)
}

pub fn free() -> u16 {
    control_plane::free_port()
}

pub fn node_of<'a>(topo: &'a Topology, node: &str) -> &'a juneau::standalone::topology::NodeNs {
    topo.nodes.iter().find(|n| n.name == node).unwrap()
}

pub fn json(cp: &ControlPlane, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&cp.kubectl_ok(&all)).unwrap()
}

/// The Pod's `status.podIPs` once it is Ready.
pub fn ready_ips(cp: &ControlPlane, name: &str) -> Option<Vec<String>> {
    let p = json(cp, &["get", "pod", name, "-n", "default"]);
    let ready = p["status"]["conditions"]
        .as_array()?
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    let ips: Vec<String> = p["status"]["podIPs"]
        .as_array()?
        .iter()
        .filter_map(|i| i["ip"].as_str().map(str::to_owned))
        .collect();
    (ready && !ips.is_empty()).then_some(ips)
}

pub fn names(cp: &ControlPlane, kind: &str) -> Vec<String> {
    let mut v: Vec<String> = json(cp, &["get", kind, "-n", "default"])["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// One running container of Pod `pod` on `rt`.
pub fn container_of(rt: &Containerd, pod: &str) -> String {
    let sandbox = rt.crictl_ok(&["pods", "--name", pod, "--state", "ready", "-q"]);
    let sandbox = sandbox.lines().next().unwrap_or("").to_owned();
    assert!(!sandbox.is_empty(), "no sandbox of {pod}");
    rt.crictl_ok(&["ps", "--pod", &sandbox, "-q"])
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}
