//! Juneau as its manifests deploy it (issue 28): `kind/`'s CRDs, namespace, RBAC,
//! DaemonSet and two Deployments applied to the kubelet testbed's Nodes, run by
//! kube-controller-manager and kube-scheduler of the same module, from an image
//! `juneau:dev` built here. What a cluster has and this bed must give (plan:
//! docs/kubelet-plan.md, section 3):
//! - the ServiceAccount admission plugin, with the controller manager's `default`
//!   accounts and `kube-root-ca.crt` ConfigMaps: the Pods get their accounts' tokens;
//! - the `kubernetes` Service from a hostNetwork Pod: 10.0.0.1 on each Node's
//!   loopback, relayed to the API server (its certificate names that address);
//! - the webhook's Service from the API server: a `cluster` egress (HTTP CONNECT on a
//!   unix socket) dialing from node-a, with the API server routing to the Service's
//!   endpoints (`--enable-aggregator-routing`);
//! - a file system per Node: each Node's containerd, and so every container it runs,
//!   sees the Node's folder at one shared path (`HOST`, [`View`]), where the
//!   manifests' hostPaths point; its `sys/fs/bpf` a bpffs of its own, shared (the
//!   daemon's Bidirectional mount asks for it).
//!
//! The manifests' fields changed, each asserted to exist as shipped: the four
//! hostPaths and the conflist's socket (under the Node's folder), `--underlay` (the
//! bed's `ul0`), the webhook's `--service-cidr` (this API server's) and the caBundle.
#![allow(dead_code)]
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use base64::Engine as _;
use juneau::standalone::topology::{Topology, UNDERLAY_DEV};

use crate::{
    containerd::{self, Containerd, View},
    control_plane::{ControlPlane, Owned, ca, leaf, tool},
    kubelet::{Kubelet, run},
    kubelet_bed::{NODES, free, node_of, start_kubelets},
    node_bed::{TestDir, wait_for},
    relay,
};

/// The `kubernetes` Service's ClusterIP: what the kubelet gives hostNetwork Pods as
/// `KUBERNETES_SERVICE_HOST`.
pub const API_SERVICE_IP: &str = "10.0.0.1";
/// The name the manifests give their image (containerd's full form).
const IMAGE: &str = "docker.io/library/juneau:dev";
/// The host paths of `kind/daemonset.yaml` that become the Node's own.
const NODE_PATHS: [&str; 4] = [
    "/opt/cni/bin",
    "/etc/cni/net.d",
    "/sys/fs/bpf",
    "/run/juneau",
];

/// A bpffs mounted for one Node, made shared; unmounted when dropped.
struct Bpffs(PathBuf);

impl Drop for Bpffs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The bed. Dropped as a cluster stops: kubelets, runtimes, the Nodes' bpffs, the
/// Nodes, the controller manager and scheduler, the API server, the folder.
pub struct ManifestBed {
    pub kubelets: Vec<Kubelet>,
    pub runtimes: Vec<Containerd>,
    _bpffs: Vec<Bpffs>,
    pub topo: Topology,
    _controllers: Vec<Owned>,
    pub cp: ControlPlane,
    pub dir: TestDir,
}

impl ManifestBed {
    /// The Nodes with kubelets and no network (`extra_node_setup(node, netns name)`
    /// runs first in each), the control plane with its controllers, then the manifests; returns once the DaemonSet and both Deployments are rolled
    /// out and every Node is Ready.
    pub fn start(extra_node_setup: impl Fn(&str, &str)) -> ManifestBed {
        let dir = TestDir::new(std::env::temp_dir().join(format!(
            "juneau-kd-{}-{}",
            std::process::id(),
            free()
        )));
        let names: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
        let topo = Topology::new(&format!("jn-kd{}", free()), &names).unwrap();
        for node in NODES {
            let ns = node_of(&topo, node).ns.name().to_owned();
            run(Command::new("ip").args([
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{API_SERVICE_IP}/32"),
                "dev",
                "lo",
            ]));
            extra_node_setup(node, &ns);
        }
        let egress = dir.0.join("egress.sock");
        relay::connect_proxy(&egress, node_of(&topo, "node-a").ns.path());
        let egress_config = dir.0.join("egress.yaml");
        std::fs::write(
            &egress_config,
            format!(
                "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\n\
                 egressSelections:\n- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n    \
                 transport:\n      uds:\n        udsName: {}\n",
                egress.display()
            ),
        )
        .unwrap();
        let cp = ControlPlane::start_cluster(&[
            &format!("--egress-selector-config-file={}", egress_config.display()),
            "--enable-aggregator-routing=true",
            // The kubelets by their addresses (the proxy dials addresses, and the
            // Nodes' names resolve nowhere).
            "--kubelet-preferred-address-types=InternalIP",
        ]);
        let upstream = cp.server().trim_start_matches("https://").parse().unwrap();
        for node in NODES {
            let at = format!("{API_SERVICE_IP}:443").parse().unwrap();
            relay::relay_at(node_of(&topo, node).ns.path(), at, upstream);
        }
        let controllers = start_controllers(&cp, &dir.0);
        cp.install_crds_and(&["namespace.yaml", "rbac.yaml"]);

        // Every Node's folder, seen by its runtime at `host`.
        let host = dir.0.join("host");
        std::fs::create_dir_all(&host).unwrap();
        let mut bpffs = Vec::new();
        for node in NODES {
            let own = dir.0.join(node);
            for p in NODE_PATHS {
                std::fs::create_dir_all(own.join(&p[1..])).unwrap();
            }
            let fs = own.join("sys/fs/bpf");
            run(Command::new("mount").args(["-t", "bpf", "bpf"]).arg(&fs));
            bpffs.push(Bpffs(fs.clone()));
            run(Command::new("mount").arg("--make-shared").arg(&fs));
        }
        for node in NODES {
            crate::kubelet::share_root(&dir.0.join(format!("kubelet-{node}")));
        }
        let (pause, busybox) = containerd::test_images(&dir.0.join("images"));
        let juneau = juneau_image(&dir.0.join("images"));
        let runtimes: Vec<Containerd> = NODES
            .iter()
            .map(|node| {
                let view = View {
                    from: dir.0.join(node),
                    at: host.clone(),
                    cni_bin: host.join("opt/cni/bin"),
                    cni_conf: host.join("etc/cni/net.d"),
                };
                Containerd::start_in_view(
                    &dir.0.join(format!("containerd-{node}")),
                    node_of(&topo, node).ns.path(),
                    view,
                    &[&pause, &busybox, &juneau],
                )
            })
            .collect();
        let kubelets = start_kubelets(&cp, &topo, &runtimes, &dir.0, false);
        let bed = ManifestBed {
            kubelets,
            runtimes,
            _bpffs: bpffs,
            topo,
            _controllers: controllers,
            cp,
            dir,
        };
        bed.deploy(&host);
        bed
    }

    /// The webhook's Secret, then the three workloads as `kind/` ships them but for
    /// the fields this bed must change; waits for the rollouts.
    fn deploy(&self, host: &Path) {
        let authority = ca("juneau-test-webhook-ca");
        let svc = "juneau-webhook.juneau-system.svc";
        let (crt, key) = leaf(
            &[svc, "juneau-webhook.juneau-system"],
            svc,
            None,
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            &authority,
        );
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        self.apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: juneau-webhook-tls, namespace: juneau-system}}\n\
             type: kubernetes.io/tls\ndata: {{tls.crt: {}, tls.key: {}}}\n",
            b64(&crt),
            b64(&key)
        ));
        let mut docs = Vec::new();
        for file in ["daemonset.yaml", "controller.yaml", "webhook.yaml"] {
            for mut doc in manifest_docs(file) {
                rewrite(&mut doc, host, &b64(&authority.0.pem()));
                docs.push(doc.to_string());
            }
        }
        self.apply(&docs.join("\n"));
        for (kind, name) in [
            ("daemonset", "juneau-node"),
            ("deployment", "juneau-controller"),
            ("deployment", "juneau-webhook"),
        ] {
            let out = self.cp.kubectl(&[
                "rollout",
                "status",
                "-n",
                "juneau-system",
                &format!("{kind}/{name}"),
                "--timeout=180s",
            ]);
            assert!(
                out.status.success(),
                "{kind}/{name} did not roll out: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.describe()
            );
        }
        for k in &self.kubelets {
            k.wait_ready(&self.cp, Duration::from_secs(60));
        }
    }

    pub fn apply(&self, yaml: &str) {
        self.cp.apply_ok(yaml);
    }

    /// Every Pod, the default namespace's events, and the last lines of node-a's
    /// kubelet, containerd and daemon: what a failed wait shows.
    pub fn describe(&self) -> String {
        let daemon = std::fs::read_dir(self.kubelets[0].dir.join("logs"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("_juneau-node-"))
            .filter_map(|e| {
                let d = e.path().join("node");
                let last = std::fs::read_dir(&d)
                    .ok()?
                    .flatten()
                    .map(|f| f.path())
                    .max()?;
                std::fs::read_to_string(last).ok()
            })
            .collect::<String>();
        let tail = |t: &str| {
            t.lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        };
        format!(
            "{}\n{}\nkubelet node-a:\n{}\ncontainerd node-a:\n{}\ndaemon node-a:\n{}",
            self.cp.kubectl_ok(&["get", "pods", "-A", "-o", "wide"]),
            self.cp.kubectl_ok(&["get", "events", "-n", "default"]),
            self.kubelets[0].log_tail(30),
            tail(&self.runtimes[0].log_tail()),
            tail(&daemon),
        )
    }

    /// The juneau-system Pods labelled `app.kubernetes.io/name=<app>`, as JSON.
    pub fn pods_of(&self, app: &str) -> Vec<serde_json::Value> {
        let label = format!("app.kubernetes.io/name={app}");
        let list = crate::kubelet_bed::json(
            &self.cp,
            &["get", "pods", "-n", "juneau-system", "-l", &label],
        );
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// The log of container `container` of `app`'s Pod on `node`, through the API
    /// server (which reaches the kubelet by the egress).
    pub fn log_of(&self, app: &str, node: &str, container: &str) -> String {
        let Some(pod) = self
            .pods_of(app)
            .into_iter()
            .find(|p| p["spec"]["nodeName"] == node)
        else {
            return String::new();
        };
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let out = self
            .cp
            .kubectl(&["logs", "-n", "juneau-system", &name, "-c", container]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Pod `name` (namespace default)'s `status.podIPs` once it is Ready.
    pub fn wait_ready(&self, name: &str) -> Vec<String> {
        wait_for(
            Duration::from_secs(90),
            || self.describe(),
            || crate::kubelet_bed::ready_ips(&self.cp, name),
        )
    }
}

/// kube-controller-manager (only the controllers this bed's objects need) and
/// kube-scheduler, as admin, neither serving anything.
fn start_controllers(cp: &ControlPlane, dir: &Path) -> Vec<Owned> {
    let log = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
    let kcm = Owned::spawn(
        Command::new(tool("k8s", "kube-controller-manager"))
            .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
            .arg(format!(
                "--root-ca-file={}",
                cp.certs().join("ca.crt").display()
            ))
            .arg(
                "--controllers=daemonset-controller,deployment-controller,\
                 replicaset-controller,serviceaccount-controller,\
                 root-ca-certificate-publisher-controller,endpointslice-controller,\
                 garbage-collector-controller",
            )
            .args([
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
            ])
            .stderr(log("kube-controller-manager.log")),
    );
    let scheduler = Owned::spawn(
        Command::new(tool("k8s", "kube-scheduler"))
            .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
            .args(["--leader-elect=false", "--secure-port=0"])
            .stderr(log("kube-scheduler.log")),
    );
    vec![kcm, scheduler]
}

/// The documents of `kind/<file>`, as JSON.
fn manifest_docs(file: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(ControlPlane::manifest(file)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &serde_json::Value| !v.is_null())
        .collect()
}

/// The bed's changes to one shipped document; each asserts the field is there as
/// shipped, so that a changed manifest fails here rather than deploying unchanged.
fn rewrite(doc: &mut serde_json::Value, host: &Path, ca_bundle: &str) {
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match (doc["kind"].as_str().unwrap_or_default(), name.as_str()) {
        ("DaemonSet", "juneau-node") => {
            let spec = &mut doc["spec"]["template"]["spec"];
            let mut moved = 0;
            for v in spec["volumes"].as_array_mut().unwrap() {
                let path = v["hostPath"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if NODE_PATHS.contains(&path.as_str()) {
                    v["hostPath"]["path"] = host.join(&path[1..]).display().to_string().into();
                    moved += 1;
                }
            }
            assert_eq!(
                moved,
                NODE_PATHS.len(),
                "daemonset.yaml's host paths: {spec}"
            );
            let script = &mut spec["initContainers"][0]["command"][2];
            let text = script.as_str().unwrap().to_owned();
            assert!(
                text.contains("\"socket\":\"/run/juneau/cni.sock\""),
                "{text}"
            );
            *script = text
                .replace(
                    "/run/juneau/cni.sock",
                    &host.join("run/juneau/cni.sock").display().to_string(),
                )
                .into();
            let node = spec["containers"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|c| c["name"] == "node")
                .unwrap();
            set_flag(&mut node["command"], "--underlay", "eth0", UNDERLAY_DEV);
        }
        ("Deployment", "juneau-webhook") => {
            let c = &mut doc["spec"]["template"]["spec"]["containers"][0]["command"];
            set_flag(c, "--service-cidr", "10.96.0.0/16", "10.0.0.0/24");
        }
        (kind, _) if kind.ends_with("WebhookConfiguration") => {
            for hook in doc["webhooks"].as_array_mut().unwrap() {
                assert_eq!(hook["clientConfig"]["caBundle"], "", "{hook}");
                hook["clientConfig"]["caBundle"] = ca_bundle.into();
            }
        }
        _ => {}
    }
}

/// The argument after `flag` in `command`, which must be `shipped`, becomes `value`.
fn set_flag(command: &mut serde_json::Value, flag: &str, shipped: &str, value: &str) {
    let args = command.as_array_mut().unwrap();
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    assert_eq!(args[i + 1], shipped, "{flag} as shipped");
    args[i + 1] = value.into();
}

/// `juneau:dev` as an image archive in `dir`: `juneau` and `juneau-cni` of this build
/// with the libraries they load (ldd), busybox as `/bin/sh` and its applets for the
/// install container's script, `/var/run` a link to `/run`.
pub fn juneau_image(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let juneau = juneau::standalone::sibling_binary("juneau");
    let cni = juneau::standalone::sibling_binary("juneau-cni");
    let mut libs: Vec<String> = Vec::new();
    for bin in [&juneau, &cni] {
        let out = Command::new("ldd").arg(bin).output().unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
            // "/lib64/ld-linux-x86-64.so.2 (0x...)"
            let path = line
                .split("=>")
                .last()
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or_default();
            if path.starts_with('/') && !libs.iter().any(|l| l == path) {
                libs.push(path.to_owned());
            }
        }
    }
    let mut files: Vec<(String, PathBuf)> = vec![
        ("usr/local/bin/juneau".into(), juneau.clone()),
        ("usr/local/bin/juneau-cni".into(), cni.clone()),
        ("bin/busybox".into(), "/bin/busybox".into()),
    ];
    for l in &libs {
        // The real file (`libc.so.6` may be a link), at the path the loader asks.
        let real = std::fs::canonicalize(l).unwrap();
        files.push((l[1..].to_owned(), real));
    }
    let files: Vec<(&str, &Path)> = files
        .iter()
        .map(|(i, p)| (i.as_str(), p.as_path()))
        .collect();
    let links: Vec<(String, &str)> = ["sh", "cp", "chmod", "mv", "printf"]
        .iter()
        .map(|a| (format!("bin/{a}"), "busybox"))
        .collect();
    let links: Vec<(&str, &str)> = links.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    // As in a Debian image: the runtime names Pod namespaces /var/run/netns/cni-*.
    let links: Vec<(&str, &str)> = links.into_iter().chain([("var/run", "/run")]).collect();
    let out = dir.join("juneau.tar");
    containerd::oci_image_linked(&out, IMAGE, &files, &links, &["/usr/local/bin/juneau"]);
    out
}
