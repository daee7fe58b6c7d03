//! Cluster DNS and the API server through their ClusterIPs on real Kubernetes parts
//! (SVC-01, SVC-02): a kube-apiserver with etcd, `juneau controller`, one Node (a
//! network namespace) running `juneau node` against the API server and containerd's CRI
//! plugin with Juneau's conflist. The Node's daemon reads the cluster's Services and
//! EndpointSlices from the API. CoreDNS, built from its Go module, runs in a Pod's
//! sandbox on the default Subnet and watches the API server through the `kubernetes`
//! Service's ClusterIP, whose backend is the Node's own address (the API server as a
//! hostNetwork backend: a relay on the Node's address stands for it, since the test's
//! API server listens on the test's loopback). A busybox container in another sandbox
//! resolves `kubernetes.default.svc.cluster.local` through the DNS Service's ClusterIP,
//! then its namespace reaches `https://<kubernetes ClusterIP>:443/version`.
//!
//! No kube-controller-manager runs here: the test writes the two EndpointSlices itself,
//! as that controller (for CoreDNS) and the API server's endpoint reconciler (off in
//! the test control plane) would.
#[path = "common/containerd.rs"]
mod containerd;
#[path = "common/control_plane.rs"]
mod control_plane;
#[path = "common/node_bed.rs"]
mod node_bed;
#[path = "common/relay.rs"]
mod relay;

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use containerd::Containerd;
use control_plane::{ControlPlane, Owned};
use juneau::standalone::topology::Topology;
use node_bed::{TestDir, as_account, start_node, wait_for};

const NODE: &str = "node-a";
/// node-a's address on the underlay (`Topology`'s first Node).
const NODE_IP: &str = "10.99.0.1";
/// The API server as the `kubernetes` Service's backend: node-a's address.
const API_BACKEND_PORT: u16 = 6443;
/// The `kubernetes` Service's ClusterIP (the test control plane's Service CIDR is
/// 10.0.0.0/24) and the DNS Service's.
const KUBERNETES_IP: &str = "10.0.0.1";
const DNS_IP: &str = "10.0.0.10";

fn pod(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  nodeName: {NODE}\n  containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    )
}

/// An EndpointSlice of `service` with one ready endpoint on this test's Node.
fn slice(namespace: &str, service: &str, address: &str, ports: &[(&str, u16, &str)]) -> String {
    control_plane::endpoint_slice(namespace, service, address, NODE, ports)
}

/// Runs `argv` in the network namespace at `netns`; its output.
fn in_netns(netns: &Path, argv: &[&str]) -> std::process::Output {
    Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .args(argv)
        .output()
        .unwrap()
}

#[test]
fn svc_01_svc_02_a_pod_resolves_kubernetes_default_through_coredns_and_reaches_the_api_server() {
    let coredns = control_plane::tool("coredns", "coredns");
    let cp = ControlPlane::start();
    cp.install_crds_and(&["namespace.yaml", "rbac.yaml"]);
    let dir =
        TestDir::new(std::env::temp_dir().join(format!("juneau-svc-e2e-{}", std::process::id())));
    let dir = &dir.0;
    let ctl_kubeconfig =
        cp.kubeconfig_for_token("juneau-controller", &as_account(&cp, "juneau-controller"));
    let _controller = Owned::spawn(
        Command::new(env!("CARGO_BIN_EXE_juneau"))
            .args(["controller", "--lease-namespace", "juneau-system"])
            .arg("--kubeconfig")
            .arg(&ctl_kubeconfig)
            .stderr(std::fs::File::create(dir.join("controller.log")).unwrap()),
    );
    // The default Vpc (consuming Services) and Subnet, made by the controller.
    wait_for(
        Duration::from_secs(30),
        || "the controller made no default Subnet".into(),
        || {
            cp.kubectl(&["get", "subnet", "default"])
                .status
                .success()
                .then_some(())
        },
    );
    let applied = cp.apply(&format!(
        "{}---\n{}---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: kube-dns, namespace: kube-system}}\n\
         spec:\n  clusterIP: {DNS_IP}\n  ports:\n  - {{name: dns, port: 53, protocol: UDP}}\n  \
         - {{name: dns-tcp, port: 53, protocol: TCP}}\n---\n{}",
        pod("coredns", "kube-system"),
        pod("client", "default"),
        slice(
            "default",
            "kubernetes",
            NODE_IP,
            &[("https", API_BACKEND_PORT, "TCP")]
        ),
    ));
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    let topo = Topology::new(
        &format!("jn-se2e{}", std::process::id()),
        &[NODE.to_owned()],
    )
    .unwrap();
    let ns = &topo.nodes[0].ns;
    // The API server as node-a's hostNetwork backend of `kubernetes`.
    let upstream = cp.server().trim_start_matches("https://").parse().unwrap();
    relay::relay_at(
        ns.path(),
        format!("{NODE_IP}:{API_BACKEND_PORT}").parse().unwrap(),
        upstream,
    );
    let daemon = start_node(&cp, &topo, NODE, dir, "juneau-svc-e2e");
    let (pause, busybox) = containerd::test_images(&dir.join("images"));
    let runtime = Containerd::start(
        &dir.join("containerd"),
        ns.path(),
        &juneau::standalone::sibling_binary("juneau-cni"),
        &serde_json::json!({
            "cniVersion": "1.1.0", "name": "juneau",
            "plugins": [{"type": "juneau-cni", "socket": daemon.socket}],
        })
        .to_string(),
        &[&pause, &busybox],
    );
    let uid = |ns: &str, name: &str| {
        cp.kubectl_ok(&[
            "get",
            "pod",
            name,
            "-n",
            ns,
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    };
    let run = |ns: &str, name: &str| {
        runtime
            .run_pod(ns, name, &uid(ns, name))
            .unwrap_or_else(|e| {
                panic!(
                    "RunPodSandbox {name}: {e}\ncontainerd: {}\ndaemon: {}",
                    runtime.log_tail(),
                    std::fs::read_to_string(&daemon.log).unwrap_or_default()
                )
            })
    };
    let dns_sandbox = run("kube-system", "coredns");
    let client_sandbox = run("default", "client");
    let (dns_netns, dns_ip) = runtime.pod_network(&dns_sandbox);
    let (client_netns, _) = runtime.pod_network(&client_sandbox);
    // CoreDNS's backend slice, as kube-controller-manager would write it.
    let applied = cp.apply(&slice(
        "kube-system",
        "kube-dns",
        &dns_ip,
        &[("dns", 53, "UDP"), ("dns-tcp", 53, "TCP")],
    ));
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    // CoreDNS in the DNS Pod's namespace, watching the API server by the `kubernetes`
    // ClusterIP (through the datapath, out of the Node's stack, to the Node's address).
    let kubeconfig = cp.kubeconfig_via("coredns", &format!("https://{KUBERNETES_IP}:443"));
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:53 {{\n    errors\n    kubernetes cluster.local {{\n        kubeconfig {}\n    }}\n}}\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    let dns_log = dir.join("coredns.log");
    let _coredns = Owned::spawn(
        Command::new("nsenter")
            .arg(format!("--net={}", dns_netns.display()))
            .arg(&coredns)
            .arg("-conf")
            .arg(&corefile)
            .stdout(std::fs::File::create(&dns_log).unwrap())
            .stderr(Stdio::null()),
    );

    // The client container resolves the API server's name through the DNS ClusterIP.
    let ctr = runtime.run_busybox(&client_sandbox, "client");
    let name = "kubernetes.default.svc.cluster.local";
    let answer = wait_for(
        Duration::from_secs(60),
        || {
            format!(
                "{name} did not resolve through {DNS_IP}\ncoredns: {}\ndaemon: {}",
                std::fs::read_to_string(&dns_log).unwrap_or_default(),
                std::fs::read_to_string(&daemon.log).unwrap_or_default()
            )
        },
        || {
            let out = runtime.crictl(&[
                "exec",
                &ctr,
                "/bin/busybox",
                "nslookup",
                "-type=a",
                name,
                DNS_IP,
            ]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.contains(&format!("Address: {KUBERNETES_IP}"))
                .then_some(text)
        },
    );
    assert!(answer.contains(name), "{answer}");
    // The API server, through its ClusterIP, from the client Pod's namespace.
    let ca = cp.kubeconfig.parent().unwrap().join("certs/ca.crt");
    assert!(ca.exists(), "{}", ca.display());
    let out = in_netns(
        &client_netns,
        &[
            "curl",
            "-s",
            "--max-time",
            "5",
            // The serving certificate names the ClusterIP, as a cluster's does.
            "--cacert",
            &ca.display().to_string(),
            &format!("https://{KUBERNETES_IP}:443/version"),
        ],
    );
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.contains("\"gitVersion\": \"v1.37.2\""),
        "/version through the ClusterIP: {version} {}\ndaemon: {}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&daemon.log).unwrap_or_default()
    );
    drop(runtime);
    drop(daemon);
    drop(topo);
}
