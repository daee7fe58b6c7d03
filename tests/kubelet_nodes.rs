//! Real Kubernetes Nodes (issue 28): on each Node namespace a kubelet v1.37.2 built from
//! its module, on containerd's CRI, registered with the test's kube-apiserver, beside
//! `juneau node`; `juneau controller` against the same API server. Pods are created with
//! `kubectl apply` only: the kubelet makes their sandboxes (CNI ADD through containerd),
//! reports their addresses, and deletes them (CNI DEL). docs/kubelet-plan.md says how
//! the kubelet runs here without changing the machine.
#[path = "common/containerd.rs"]
mod containerd;
#[path = "common/control_plane.rs"]
mod control_plane;
#[path = "common/kubelet.rs"]
mod kubelet;
#[path = "common/node_bed.rs"]
mod node_bed;
#[path = "common/relay.rs"]
mod relay;

use std::{process::Command, time::Duration};

use containerd::Containerd;
use control_plane::{ControlPlane, Owned};
use juneau::standalone::topology::Topology;
use kubelet::Kubelet;
use node_bed::{NodeDaemon, TestDir, as_account, start_node, wait_for};

const NODES: [&str; 2] = ["node-a", "node-b"];

fn pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{{\"interface\": \"eth0\", \"l2Network\": \"lab-net\"}}]'\n\
         spec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  \
         containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    )
}

fn json(cp: &ControlPlane, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&cp.kubectl_ok(&all)).unwrap()
}

/// The Pod's `status.podIPs` once it is Ready.
fn ready_ips(cp: &ControlPlane, name: &str) -> Option<Vec<String>> {
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

/// `<pod>.eth0`'s address as the controller allocated it (without its prefix).
fn nic_address(cp: &ControlPlane, pod: &str) -> Option<String> {
    let n = json(cp, &["get", "networkinterfaces", "-n", "default"]);
    let nic = n["items"]
        .as_array()?
        .iter()
        .find(|i| i["metadata"]["name"] == format!("{pod}.eth0"))?;
    let a = nic["status"]["address"].as_str()?;
    Some(a.split('/').next()?.to_owned())
}

fn endpoint_exists(cp: &ControlPlane, name: &str) -> bool {
    json(cp, &["get", "networkendpoints", "-n", "default"])["items"]
        .as_array()
        .is_some_and(|a| a.iter().any(|i| i["metadata"]["name"] == name))
}

/// One running container of Pod `pod` on `rt`.
fn container_of(rt: &Containerd, pod: &str) -> String {
    let sandbox = rt.crictl_ok(&["pods", "--name", pod, "--state", "ready", "-q"]);
    let sandbox = sandbox.lines().next().unwrap_or("").to_owned();
    assert!(!sandbox.is_empty(), "no sandbox of {pod}");
    rt.crictl_ok(&["ps", "--pod", &sandbox, "-q"])
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

/// The testbed: the API server with Juneau's CRDs and `objects`, the controller, and
/// on every Node its daemon, containerd (Juneau's conflist) and kubelet. Dropped in
/// the order a cluster stops: kubelets first (they would make sandboxes again), then
/// the runtimes (their sandboxes' DEL needs the daemons), the daemons, the Nodes, the
/// controller, the API server; the folder last.
struct Bed {
    kubelets: Vec<Kubelet>,
    runtimes: Vec<Containerd>,
    daemons: Vec<NodeDaemon>,
    topo: Topology,
    _controller: Owned,
    cp: ControlPlane,
    _dir: TestDir,
}

impl Bed {
    fn start(objects: &str) -> Bed {
        let cp = ControlPlane::start();
        cp.install_crds_and(&["namespace.yaml", "rbac.yaml"]);
        let dir = TestDir::new(std::env::temp_dir().join(format!(
            "juneau-kl-{}-{}",
            std::process::id(),
            free()
        )));
        let applied = cp.apply(objects);
        assert!(
            applied.status.success(),
            "{}",
            String::from_utf8_lossy(&applied.stderr)
        );
        let ctl_kubeconfig =
            cp.kubeconfig_for_token("juneau-controller", &as_account(&cp, "juneau-controller"));
        let controller = Owned::spawn(
            Command::new(env!("CARGO_BIN_EXE_juneau"))
                .args(["controller", "--lease-namespace", "juneau-system"])
                .arg("--kubeconfig")
                .arg(&ctl_kubeconfig)
                .stderr(std::fs::File::create(dir.0.join("controller.log")).unwrap()),
        );
        let names: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
        let topo = Topology::new(&format!("jn-kl{}", free()), &names).unwrap();
        let daemons: Vec<NodeDaemon> = NODES
            .iter()
            .map(|n| start_node(&cp, &topo, n, &dir.0, "juneau-kl"))
            .collect();
        let (pause, busybox) = containerd::test_images(&dir.0.join("images"));
        let runtimes: Vec<Containerd> = NODES
            .iter()
            .zip(&daemons)
            .map(|(node, daemon)| {
                Containerd::start(
                    &dir.0.join(format!("containerd-{node}")),
                    node_of(&topo, node).ns.path(),
                    &juneau::standalone::sibling_binary("juneau-cni"),
                    &serde_json::json!({
                        "cniVersion": "1.1.0", "name": "juneau",
                        "plugins": [{"type": "juneau-cni", "socket": daemon.socket}],
                    })
                    .to_string(),
                    &[&pause, &busybox],
                )
            })
            .collect();
        let kubelets: Vec<Kubelet> = NODES
            .iter()
            .zip(&runtimes)
            .map(|(node, rt)| {
                let t = node_of(&topo, node);
                Kubelet::start(
                    &cp,
                    node,
                    t.ip,
                    t.ns.path(),
                    rt,
                    &dir.0.join(format!("kubelet-{node}")),
                )
            })
            .collect();
        Bed {
            kubelets,
            runtimes,
            daemons,
            topo,
            _controller: controller,
            cp,
            _dir: dir,
        }
    }

    fn apply(&self, yaml: &str) {
        let applied = self.cp.apply(yaml);
        assert!(
            applied.status.success(),
            "{}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }

    /// The Pods, node-a's kubelet and daemon: what a failed wait shows.
    fn describe(&self) -> String {
        format!(
            "{}\nkubelet node-a:\n{}\ndaemon node-a:\n{}",
            self.cp
                .kubectl_ok(&["get", "pods", "-n", "default", "-o", "wide"]),
            self.kubelets[0].log_tail(30),
            std::fs::read_to_string(&self.daemons[0].log).unwrap_or_default()
        )
    }

    /// Pod `name`'s `status.podIPs` once it is Ready.
    fn wait_ready(&self, name: &str) -> Vec<String> {
        wait_for(
            Duration::from_secs(90),
            || self.describe(),
            || ready_ips(&self.cp, name),
        )
    }

    /// The juneau veths in Node `node`'s namespace (host ends with the owner alias).
    fn veths(&self, node: &str) -> usize {
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
    fn served(&self, n: usize, command: &str, pod: &str) -> usize {
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

fn free() -> u16 {
    control_plane::free_port()
}

fn node_of<'a>(topo: &'a Topology, node: &str) -> &'a juneau::standalone::topology::NodeNs {
    topo.nodes.iter().find(|n| n.name == node).unwrap()
}

const LAB_NET: &str = "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n---\n\
     apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: lab-net}\n\
     spec: {vpc: tenant-a, cidr: 10.71.0.0/24}\n";

#[test]
fn mx_01_kubelet_nodes_run_pods_with_juneau_addresses_and_delete_runs_del() {
    let flags_before = kubelet::machine_kernel_flags();
    let bed = Bed::start(LAB_NET);
    let cp = &bed.cp;
    // The Nodes as the kubelets registered them: their underlay addresses.
    for node in NODES {
        let n = json(cp, &["get", "node", node]);
        let internal = n["status"]["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["type"] == "InternalIP")
            .map(|a| a["address"].clone());
        assert_eq!(
            internal,
            Some(node_of(&bed.topo, node).ip.to_string().into()),
            "{n}"
        );
    }
    bed.apply(&format!(
        "{}---\n{}",
        pod("pa", "node-a"),
        pod("pb", "node-b")
    ));
    let ips: Vec<Vec<String>> = ["pa", "pb"].iter().map(|p| bed.wait_ready(p)).collect();
    for (p, ips) in ["pa", "pb"].iter().zip(&ips) {
        let nic = nic_address(cp, p).expect("an allocated NIC");
        assert_eq!(
            ips,
            &vec![nic],
            "{p}'s status.podIPs are its Juneau address"
        );
    }
    // The kubelet's containers reach each other across the Nodes.
    let ctr = container_of(&bed.runtimes[0], "pa");
    let ping = bed.runtimes[0].crictl_ok(&[
        "exec",
        &ctr,
        "/bin/busybox",
        "ping",
        "-c",
        "3",
        "-W",
        "2",
        &ips[1][0],
    ]);
    assert!(
        ping.contains("3 packets transmitted, 3 packets received"),
        "{ping}"
    );

    // kubectl delete: the kubelet stops the sandbox (CNI DEL), the endpoint and the
    // veth go, the Pod object goes once the kubelet confirms.
    assert_eq!(bed.veths("node-a"), 1);
    cp.kubectl_ok(&["delete", "pod", "pa", "-n", "default", "--wait=true"]);
    wait_for(
        Duration::from_secs(30),
        || format!("pa.eth0's endpoint outlived its Pod:\n{}", bed.describe()),
        || (!endpoint_exists(cp, "pa.eth0")).then_some(()),
    );
    wait_for(
        Duration::from_secs(30),
        || "pa's veth outlived its Pod".into(),
        || (bed.veths("node-a") == 0).then_some(()),
    );
    assert!(
        bed.served(0, "DEL", "default/pa") >= 1,
        "no DEL of default/pa"
    );
    assert!(endpoint_exists(cp, "pb.eth0"));
    // The machine's kernel settings are what they were.
    assert_eq!(kubelet::machine_kernel_flags(), flags_before);
}

/// A direct ElasticIP Pod whose httpd answers the kubelet's probes (readiness httpGet,
/// liveness tcpSocket, every second) through its Node route (EIP-18).
const WEB: &str = "apiVersion: juneau.loutres.me/v1alpha1\nkind: AddressPool\nmetadata: {name: lan}\n\
     spec: {advertiseMode: arp, addresses: [10.99.0.100-10.99.0.120]}\n---\n\
     apiVersion: juneau.loutres.me/v1alpha1\nkind: ExternalNetwork\nmetadata: {name: ext-net}\n\
     spec: {type: arp, addressPools: [lan]}\n---\n\
     apiVersion: juneau.loutres.me/v1alpha1\nkind: ElasticIP\nmetadata: {name: web-eip, namespace: default}\n\
     spec: {externalNetwork: ext-net}\n";

fn web_pod() -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/elastic-ip: web-eip\n\
         spec:\n  nodeName: node-a\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    \
         image: {img}\n    imagePullPolicy: Never\n    \
         command: [/bin/busybox, sh, -c, '/bin/busybox mkdir -p /www && echo ok > /www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www']\n    \
         readinessProbe: {{httpGet: {{path: /, port: 8080}}, periodSeconds: 1, failureThreshold: 1}}\n    \
         livenessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1, failureThreshold: 3}}\n",
        img = containerd::BUSYBOX
    )
}

/// A Pod without Juneau annotations: eth0 on the default Subnet.
fn plain_pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  \
         containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    )
}

/// (Ready's lastTransitionTime, the container's restartCount) of `pod`.
fn readiness(cp: &ControlPlane, pod: &str) -> (String, u64) {
    let p = json(cp, &["get", "pod", pod, "-n", "default"]);
    let since = p["status"]["conditions"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .map(|c| c["lastTransitionTime"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default();
    let restarts = p["status"]["containerStatuses"][0]["restartCount"]
        .as_u64()
        .unwrap_or(u64::MAX);
    (since, restarts)
}

fn names(cp: &ControlPlane, kind: &str) -> Vec<String> {
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

#[test]
fn eip_18_mx_01_probes_pass_through_a_kubelet_and_containerd_restart_and_nothing_leaks() {
    let mut bed = Bed::start(&format!("{LAB_NET}---\n{WEB}"));
    bed.apply(&format!(
        "{}---\n{}---\n{}",
        web_pod(),
        pod("pb", "node-b"),
        plain_pod("pc", "node-a")
    ));
    for p in ["web", "pb", "pc"] {
        bed.wait_ready(p);
    }
    let cp = &bed.cp;
    // pc is on the default Subnet (the controller's 10.16.0.0/16).
    let pc = ready_ips(cp, "pc").unwrap();
    assert!(pc[0].starts_with("10.16."), "{pc:?}");
    let before = readiness(cp, "web");
    assert_eq!(before.1, 0);
    let sandboxes = |bed: &Bed| bed.runtimes[0].crictl_ok(&["pods", "--name", "web", "-q"]);
    let sandbox = sandboxes(&bed);

    // The kubelet killed and started again, then containerd, under the running Pods.
    bed.kubelets[0].restart(&bed.cp);
    std::thread::sleep(Duration::from_secs(3));
    bed.runtimes[0].restart();
    bed.kubelets[0].wait_ready(&bed.cp, Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(5));
    let cp = &bed.cp;
    // Every probe passed: no Unhealthy event, no restart, Ready. (A restarted kubelet
    // starts its readiness results afresh: Ready may be set again by its first probe,
    // which moves lastTransitionTime without a probe failing.)
    let after = readiness(cp, "web");
    assert!(!after.0.is_empty(), "web is not Ready: {}", bed.describe());
    assert_eq!(after.1, 0, "web restarted");
    eprintln!(
        "web Ready since {} before the restarts, {} after",
        before.0, after.0
    );
    let unhealthy = cp.kubectl_ok(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        "involvedObject.name=web,reason=Unhealthy",
        "-o",
        "name",
    ]);
    assert!(unhealthy.trim().is_empty(), "failed probes: {unhealthy}");
    assert_eq!(sandboxes(&bed), sandbox, "the same sandbox, not a new one");
    // Exactly the live Pods hold addresses and ports.
    assert_eq!(
        names(cp, "networkendpoints"),
        ["pb.eth0", "pc.eth0", "web.eth0"]
    );
    assert_eq!(bed.veths("node-a"), 2);
    let seen: Vec<(&str, usize)> = ["ADD", "CHECK", "DEL", "GC"]
        .iter()
        .map(|c| (*c, bed.served(0, c, "")))
        .collect();
    eprintln!("node-a's daemon served: {seen:?}");

    // All deleted: no endpoint, NIC, or veth is left on either Node.
    cp.kubectl_ok(&["delete", "pods", "--all", "-n", "default", "--wait=true"]);
    wait_for(
        Duration::from_secs(30),
        || {
            format!(
                "left: {:?} {:?}",
                names(&bed.cp, "networkendpoints"),
                names(&bed.cp, "networkinterfaces")
            )
        },
        || {
            (names(&bed.cp, "networkendpoints").is_empty()
                && names(&bed.cp, "networkinterfaces").is_empty())
            .then_some(())
        },
    );
    for node in NODES {
        wait_for(
            Duration::from_secs(30),
            || format!("{node} kept veths"),
            || (bed.veths(node) == 0).then_some(()),
        );
    }
}
