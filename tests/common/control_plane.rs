//! A real Kubernetes control plane for tests: etcd and kube-apiserver built from their Go
//! modules (`tools/build.sh`, run by `cargo xtask test`), started on loopback with
//! certificates made here: one CA signs the serving certificate (rustls refuses a
//! self-signed leaf as its own anchor), a second CA the admin client certificate, and a
//! key pair signs ServiceAccount tokens. Flags as envtest's, plus what docs/kubernetes-
//! testbed.md found missing (`--advertise-address` with `--endpoint-reconciler-type=none`).
//! Dropping it kills both processes (its own children, by PID) and removes its folder.
// Shared by several test binaries; each uses a part of it.
#![allow(dead_code)]
use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use rcgen::{ExtendedKeyUsagePurpose, KeyPair};

#[path = "pki.rs"]
mod pki;
pub use pki::{ca, leaf};
#[path = "kubeconfigs.rs"]
mod kubeconfigs;
use kubeconfigs::kubeconfig_text;

pub struct ControlPlane {
    /// One control plane at a time per test binary: several at once on two cores make
    /// every timing in the tests a guess.
    _turn: std::sync::MutexGuard<'static, ()>,
    dir: PathBuf,
    children: Vec<Child>,
    pub kubeconfig: PathBuf,
    /// etcd's client URL (`http://127.0.0.1:<port>`), for what only etcd does
    /// (compaction).
    pub etcd_url: String,
    /// The CA the API server trusts for client certificates (a kubelet's is made by
    /// [`ControlPlane::node_kubeconfig_via`]).
    client_ca: (rcgen::Certificate, KeyPair),
}

/// The repository: this crate's folder, or its parent for the harness's benchmarks,
/// which include this file too.
fn repo() -> &'static Path {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if here.join("tools").exists() {
        here
    } else {
        here.parent().unwrap()
    }
}

/// `<cache>/<component>-<version>/bin/<name>`, the layout of `tools/build.sh`, versions
/// from `tools/versions.env`.
pub fn tool(component: &str, name: &str) -> PathBuf {
    let env = std::fs::read_to_string(repo().join("tools/versions.env")).unwrap();
    let key = format!("{}_VERSION=", component.to_uppercase());
    let version = env
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .unwrap_or_else(|| panic!("tools/versions.env has no {key}"));
    let root =
        std::env::var("JUNEAU_TOOLS_CACHE").unwrap_or_else(|_| "/var/cache/juneau-tools".into());
    let bin = Path::new(&root)
        .join(format!("{component}-{version}"))
        .join("bin")
        .join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `tools/build.sh {component}` (cargo xtask test does)",
        bin.display()
    );
    bin
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An EndpointSlice of `service` in `namespace` with one ready endpoint, `address` on
/// `node`: what kube-controller-manager (or the API server's endpoint reconciler, for
/// `kubernetes`) would write, for a control plane that runs neither.
pub fn endpoint_slice(
    namespace: &str,
    service: &str,
    address: &str,
    node: &str,
    ports: &[(&str, u16, &str)],
) -> String {
    let ports: Vec<String> = ports
        .iter()
        .map(|(n, p, proto)| format!("{{name: {n}, port: {p}, protocol: {proto}}}"))
        .collect();
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-test\n  \
         namespace: {namespace}\n  labels: {{kubernetes.io/service-name: {service}, \
         endpointslice.kubernetes.io/managed-by: juneau-test}}\naddressType: IPv4\n\
         ports: [{}]\nendpoints: [{{addresses: ['{address}'], conditions: {{ready: true}}, nodeName: {node}}}]\n",
        ports.join(", ")
    )
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until `/readyz` says ok (about 5 s).
    pub fn start() -> ControlPlane {
        Self::start_with(&[])
    }

    /// [`ControlPlane::start`] with an audit log of every request's metadata (who, verb,
    /// resource, user agent): what the API-traffic tests count. `extra` are more
    /// kube-apiserver flags.
    pub fn start_audited(extra: &[&str]) -> ControlPlane {
        Self::start_with_audit(extra, true)
    }

    /// [`ControlPlane::start`] with more kube-apiserver flags.
    pub fn start_with(extra: &[&str]) -> ControlPlane {
        Self::start_with_audit(extra, false)
    }

    /// [`ControlPlane::start_audited`] with the ServiceAccount admission plugin on, as
    /// a cluster has it (every Pod gets its account's projected token): for a control
    /// plane whose kube-controller-manager makes the `default` accounts and the
    /// `kube-root-ca.crt` ConfigMaps that plugin's Pods need.
    pub fn start_cluster(extra: &[&str]) -> ControlPlane {
        Self::launch(extra, true, true)
    }

    fn start_with_audit(extra: &[&str], audit: bool) -> ControlPlane {
        Self::launch(extra, audit, false)
    }

    fn launch(extra: &[&str], audit: bool, service_accounts: bool) -> ControlPlane {
        static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Missing binaries fail here, before anything exists to clean up.
        let (etcd_bin, apiserver_bin) = (tool("etcd", "etcd"), tool("k8s", "kube-apiserver"));
        let dir =
            std::env::temp_dir().join(format!("juneau-cp-{}-{}", std::process::id(), free_port()));
        let certs = dir.join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        let write = |name: &str, text: &str| std::fs::write(certs.join(name), text).unwrap();
        let serving_ca = ca("juneau-test-serving-ca");
        // As a cluster's: also the `kubernetes` Service's ClusterIP (the first address
        // of --service-cluster-ip-range) and its names, which Pods reach it by.
        let (crt, key) = leaf(
            &[
                "localhost",
                "127.0.0.1",
                "10.0.0.1",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            "localhost",
            None,
            ExtendedKeyUsagePurpose::ServerAuth,
            &serving_ca,
        );
        write("ca.crt", &serving_ca.0.pem());
        write("apiserver.crt", &crt);
        write("apiserver.key", &key);
        let client_ca = ca("juneau-test-client-ca");
        let (crt, key) = leaf(
            &[],
            "admin",
            Some("system:masters"),
            ExtendedKeyUsagePurpose::ClientAuth,
            &client_ca,
        );
        write("client-ca.crt", &client_ca.0.pem());
        write("admin.crt", &crt);
        write("admin.key", &key);
        let sa = KeyPair::generate().unwrap();
        write("sa.key", &sa.serialize_pem());
        write("sa.pub", &sa.public_key_pem());

        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let log = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
        let mut children = Vec::new();
        let mut etcd = Command::new(etcd_bin);
        etcd.args([
            "--name=t",
            &format!("--data-dir={}", dir.join("etcd").display()),
            "--unsafe-no-fsync=true",
            &format!("--listen-client-urls={etcd_url}"),
            &format!("--advertise-client-urls={etcd_url}"),
            &format!("--listen-peer-urls={peer_url}"),
            &format!("--initial-advertise-peer-urls={peer_url}"),
            &format!("--initial-cluster=t={peer_url}"),
        ])
        .stdout(Stdio::null())
        .stderr(log("etcd.log"));
        juneau::child::die_with_parent(&mut etcd, libc::SIGKILL);
        children.push(etcd.spawn().expect("start etcd"));
        let server = format!("https://127.0.0.1:{api_port}");
        let sa_plugin: &str = if service_accounts {
            "--disable-admission-plugins="
        } else {
            "--disable-admission-plugins=ServiceAccount"
        };
        let mut api = Command::new(apiserver_bin);
        api.args([
            &format!("--etcd-servers={etcd_url}"),
            &format!("--cert-dir={}", certs.display()),
            &format!("--secure-port={api_port}"),
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            // As a kubeadm cluster: kubelets are authorized by the Node authorizer and
            // NodeRestriction keeps each to its own Node and Pods.
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            sa_plugin,
            &format!("--service-account-issuer={server}/"),
            &format!(
                "--service-account-key-file={}",
                certs.join("sa.pub").display()
            ),
            &format!(
                "--service-account-signing-key-file={}",
                certs.join("sa.key").display()
            ),
            &format!("--client-ca-file={}", certs.join("client-ca.crt").display()),
        ])
        .args(extra);
        if audit {
            // One event per request, when it is answered (a watch: when it ends).
            std::fs::write(
                dir.join("audit-policy.yaml"),
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
            )
            .unwrap();
            api.arg(format!(
                "--audit-policy-file={}",
                dir.join("audit-policy.yaml").display()
            ))
            .arg(format!(
                "--audit-log-path={}",
                dir.join("audit.log").display()
            ));
        }
        api.stdout(Stdio::null()).stderr(log("kube-apiserver.log"));
        juneau::child::die_with_parent(&mut api, libc::SIGKILL);
        children.push(api.spawn().expect("start kube-apiserver"));

        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_text(
                &server,
                &certs.join("ca.crt"),
                "admin",
                &format!(
                    "client-certificate: {}\n    client-key: {}",
                    certs.join("admin.crt").display(),
                    certs.join("admin.key").display()
                ),
            ),
        )
        .unwrap();
        let cp = ControlPlane {
            _turn: turn,
            dir,
            children,
            kubeconfig,
            etcd_url,
            client_ca,
        };
        cp.wait_ready(Duration::from_secs(60));
        cp
    }

    fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let out = self.kubectl(&["get", "--raw", "/readyz"]);
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready within {within:?}; last answer: {}{}; its log: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log_tail("kube-apiserver.log")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The last lines of one component's log, for failure messages.
    pub fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The processes of etcd and kube-apiserver (a benchmark reads their CPU time).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Its certificates: `ca.crt` (the serving CA, what Pods verify the API server
    /// by), `sa.key`, `client-ca.crt`.
    pub fn certs(&self) -> PathBuf {
        self.dir.join("certs")
    }

    /// The API server's URL (`https://127.0.0.1:<port>`).
    pub fn server(&self) -> String {
        std::fs::read_to_string(&self.kubeconfig)
            .unwrap()
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: ").map(str::to_owned))
            .unwrap()
    }

    /// Every request the API server answered so far, from its audit log
    /// ([`ControlPlane::start_audited`]): one JSON object each, `ResponseStarted` stages
    /// (a watch's start) left out.
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("audit.log"))
            .expect("an audit log (ControlPlane::start_audited)")
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["stage"] == "ResponseComplete" || e["stage"] == "Panic")
            .collect()
    }

    /// LISTs in [`ControlPlane::audit_events`] whose user agent starts with `agent`.
    pub fn lists_by(&self, agent: &str) -> usize {
        self.audit_events()
            .iter()
            .filter(|e| {
                e["verb"] == "list"
                    && e["userAgent"]
                        .as_str()
                        .is_some_and(|a| a.starts_with(agent))
            })
            .count()
    }

    /// The revision etcd is at, then compacted to it: a watch resumed from an older
    /// resourceVersion is answered 410 Gone (with `--watch-cache=false`).
    pub fn compact_etcd(&self) -> u64 {
        let post = |path: &str, body: &str| -> serde_json::Value {
            let out = Command::new("curl")
                .args(["-sS", "-X", "POST", "-d", body])
                .arg(format!("{}{path}", self.etcd_url))
                .output()
                .expect("run curl");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).expect("etcd answers JSON")
        };
        let revision: u64 = post("/v3/kv/range", r#"{"key":"AA=="}"#)["header"]["revision"]
            .as_str()
            .expect("a revision")
            .parse()
            .unwrap();
        post(
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        );
        revision
    }

    /// `kind/<file>` of this repository: the manifests as shipped.
    pub fn manifest(file: &str) -> String {
        format!("{}/kind/{file}", repo().display())
    }

    /// The CRDs, then `kind/<file>` for each of `files`, applied as admin.
    pub fn install_crds_and(&self, files: &[&str]) {
        self.install_crds();
        for f in files {
            self.kubectl_ok(&["apply", "-f", &Self::manifest(f)]);
        }
    }

    /// kubectl (of the same build) against this control plane, as admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(tool("k8s", "kubectl"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .output()
            .expect("run kubectl")
    }

    /// kubectl with `input` on its standard input (`-f -`).
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(tool("k8s", "kubectl"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// `kubectl apply -f -` of `yaml`.
    pub fn apply(&self, yaml: &str) -> Output {
        self.kubectl_stdin(&["apply", "-f", "-"], yaml)
    }

    /// [`ControlPlane::apply`] that must succeed.
    pub fn apply_ok(&self, yaml: &str) {
        let applied = self.apply(yaml);
        assert!(
            applied.status.success(),
            "{}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }

    /// Installs `kind/crds.yaml`, which the server must take without a warning, and
    /// waits until every CRD is served.
    pub fn install_crds(&self) {
        let crds = std::fs::read_to_string(repo().join("kind/crds.yaml")).unwrap();
        let out = self.apply(&crds);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kind/crds.yaml refused: {stderr}");
        assert!(
            !stderr.contains("Warning"),
            "the server warned about kind/crds.yaml: {stderr}"
        );
        self.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd",
            "--all",
        ]);
    }

    /// kubectl that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Err(e) = c.kill() {
                eprintln!("control plane: cannot kill {}: {e}", c.id());
            }
            let _ = c.wait();
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("control plane: cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// A process a test started: killed however the test ends, and (PR_SET_PDEATHSIG) even
/// when the test binary itself is killed.
pub struct Owned(pub Child);

impl Owned {
    pub fn spawn(cmd: &mut Command) -> Owned {
        juneau::child::die_with_parent(cmd, libc::SIGKILL);
        Owned(cmd.spawn().expect("start a test process"))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
