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

/// The juneau veths in a Node's namespace (their host ends carry the owner alias).
fn juneau_veths(topo: &Topology, node: &str) -> usize {
    let ns = &topo.nodes.iter().find(|n| n.name == node).unwrap().ns;
    let out = Command::new("ip")
        .args(["-n", ns.name(), "-o", "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(juneau::node::veth::OWNER_ALIAS))
        .count()
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

#[test]
fn mx_01_kubelet_nodes_run_pods_with_juneau_addresses_and_delete_runs_del() {
    let flags_before = kubelet::machine_kernel_flags();
    let cp = ControlPlane::start();
    cp.install_crds_and(&["namespace.yaml", "rbac.yaml"]);
    let dir = TestDir::new(std::env::temp_dir().join(format!("juneau-kl-{}", std::process::id())));
    let dir = &dir.0;
    let applied = cp.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: lab-net}\n\
         spec: {vpc: tenant-a, cidr: 10.71.0.0/24}\n",
    );
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let ctl_kubeconfig =
        cp.kubeconfig_for_token("juneau-controller", &as_account(&cp, "juneau-controller"));
    let _controller = Owned::spawn(
        Command::new(env!("CARGO_BIN_EXE_juneau"))
            .args(["controller", "--lease-namespace", "juneau-system"])
            .arg("--kubeconfig")
            .arg(&ctl_kubeconfig)
            .stderr(std::fs::File::create(dir.join("controller.log")).unwrap()),
    );
    let names: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
    let topo = Topology::new(&format!("jn-kl{}", std::process::id()), &names).unwrap();
    let daemons: Vec<NodeDaemon> = NODES
        .iter()
        .map(|n| start_node(&cp, &topo, n, dir, "juneau-kl"))
        .collect();
    let (pause, busybox) = containerd::test_images(&dir.join("images"));
    let runtimes: Vec<Containerd> = NODES
        .iter()
        .zip(&daemons)
        .map(|(node, daemon)| {
            let ns = &topo.nodes.iter().find(|n| n.name == *node).unwrap().ns;
            Containerd::start(
                &dir.join(format!("containerd-{node}")),
                ns.path(),
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
            let t = topo.nodes.iter().find(|n| n.name == *node).unwrap();
            Kubelet::start(
                &cp,
                node,
                t.ip,
                t.ns.path(),
                rt,
                &dir.join(format!("kubelet-{node}")),
            )
        })
        .collect();
    // The Nodes as the kubelets registered them: their underlay addresses.
    for (node, t) in NODES.iter().zip(&topo.nodes) {
        let n = json(&cp, &["get", "node", node]);
        let internal = n["status"]["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["type"] == "InternalIP")
            .map(|a| a["address"].clone());
        assert_eq!(internal, Some(t.ip.to_string().into()), "{n}");
    }

    let applied = cp.apply(&format!(
        "{}---\n{}",
        pod("pa", "node-a"),
        pod("pb", "node-b")
    ));
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let describe = || {
        format!(
            "{}\nkubelet node-a:\n{}\ndaemon node-a:\n{}",
            cp.kubectl_ok(&["get", "pods", "-n", "default", "-o", "wide"]),
            kubelets[0].log_tail(30),
            std::fs::read_to_string(&daemons[0].log).unwrap_or_default()
        )
    };
    let ips: Vec<Vec<String>> = ["pa", "pb"]
        .iter()
        .map(|p| wait_for(Duration::from_secs(90), describe, || ready_ips(&cp, p)))
        .collect();
    for (p, ips) in ["pa", "pb"].iter().zip(&ips) {
        let nic = nic_address(&cp, p).expect("an allocated NIC");
        assert_eq!(
            ips,
            &vec![nic],
            "{p}'s status.podIPs are its Juneau address"
        );
    }
    // The kubelet's containers reach each other across the Nodes.
    let ctr = container_of(&runtimes[0], "pa");
    let ping = runtimes[0].crictl_ok(&[
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
    assert_eq!(juneau_veths(&topo, "node-a"), 1);
    cp.kubectl_ok(&["delete", "pod", "pa", "-n", "default", "--wait=true"]);
    wait_for(
        Duration::from_secs(30),
        || format!("pa.eth0's endpoint outlived its Pod:\n{}", describe()),
        || (!endpoint_exists(&cp, "pa.eth0")).then_some(()),
    );
    wait_for(
        Duration::from_secs(30),
        || "pa's veth outlived its Pod".into(),
        || (juneau_veths(&topo, "node-a") == 0).then_some(()),
    );
    assert!(endpoint_exists(&cp, "pb.eth0"));

    // The machine's kernel settings are what they were.
    assert_eq!(kubelet::machine_kernel_flags(), flags_before);
    // Kubelets first (they would make sandboxes again), then the runtimes (their
    // sandboxes' DEL needs the daemons), the daemons, the Nodes.
    drop(kubelets);
    drop(runtimes);
    drop(daemons);
    drop(topo);
}
