//! End to end on real Kubernetes parts: a kube-apiserver with etcd, `juneau controller`
//! against it, and two Nodes (network namespaces on one underlay), each running
//! `juneau node` against the API server and containerd's CRI plugin with Juneau's
//! conflist. Pods are created with kubectl; their sandboxes through CRI (crictl), so
//! `juneau-cni` is called by containerd exactly as on a kubelet's Node (CNI_ARGS with
//! K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID, IgnoreUnknown). No kubelet: see
//! docs/kubernetes-testbed.md for what stops one here.
#[path = "common/containerd.rs"]
mod containerd;
#[path = "common/control_plane.rs"]
mod control_plane;
#[path = "common/node_bed.rs"]
mod node_bed;
#[path = "common/relay.rs"]
mod relay;

use std::{process::Command, time::Duration};

use containerd::Containerd;
use control_plane::{ControlPlane, Owned};
use juneau::standalone::topology::Topology;
use node_bed::{NodeDaemon, TestDir, as_account, start_node, wait_for};

fn pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{{\"interface\": \"eth0\", \"l2Network\": \"lab-net\"}}]'\n\
         spec:\n  nodeName: {node}\n  containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    )
}

/// `kubectl get <kind> -n default -o json`'s items.
fn items(cp: &ControlPlane, kind: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&cp.kubectl_ok(&["get", kind, "-n", "default", "-o", "json"]))
            .unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

fn named<'a>(items: &'a [serde_json::Value], name: &str) -> Option<&'a serde_json::Value> {
    items.iter().find(|i| i["metadata"]["name"] == name)
}

#[test]
fn l2_01_mx_01_pods_made_by_containerd_on_two_nodes_ping_each_other_and_del_removes_the_endpoint() {
    let cp = ControlPlane::start();
    cp.install_crds_and(&["namespace.yaml", "rbac.yaml"]);
    let dir = TestDir::new(std::env::temp_dir().join(format!("juneau-e2e-{}", std::process::id())));
    let dir = &dir.0;
    let applied = cp.apply(&format!(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {{name: tenant-a}}\nspec: {{}}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {{name: lab-net}}\n\
         spec: {{vpc: tenant-a, cidr: 10.71.0.0/24}}\n---\n{}---\n{}",
        pod("pa", "node-a"),
        pod("pb", "node-b")
    ));
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    // The controller as its ServiceAccount, as the Deployment runs it.
    let ctl_kubeconfig =
        cp.kubeconfig_for_token("juneau-controller", &as_account(&cp, "juneau-controller"));
    let _controller = Owned::spawn(
        Command::new(env!("CARGO_BIN_EXE_juneau"))
            .args(["controller", "--lease-namespace", "juneau-system"])
            .arg("--kubeconfig")
            .arg(&ctl_kubeconfig)
            .stderr(std::fs::File::create(dir.join("controller.log")).unwrap()),
    );
    let address = |nic: &str| -> Option<String> {
        let nics = items(&cp, "networkinterfaces");
        let a = named(&nics, nic)?["status"]["address"].as_str()?.to_owned();
        (!a.is_empty()).then_some(a)
    };
    let (addr_a, addr_b) = wait_for(
        Duration::from_secs(30),
        || {
            format!(
                "the controller made no addressed NetworkInterfaces: {:?}",
                items(&cp, "networkinterfaces")
            )
        },
        || Some((address("pa.eth0")?, address("pb.eth0")?)),
    );

    // A daemon reads only its own Node's Pods and NICs (field selectors), and every
    // Node's endpoints (none yet).
    {
        use juneau::cluster::Cluster;
        let node_kubeconfig =
            cp.kubeconfig_for_token("juneau-node-scope", &as_account(&cp, "juneau-node"));
        let scoped = juneau::store::k8s::KubeCluster::connect_for_node(
            Some(&node_kubeconfig),
            juneau::store::k8s::NODE,
            "node-a",
        )
        .unwrap();
        let (world, _) = scoped.read().unwrap();
        let pods: Vec<&str> = world.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(pods, ["pa"]);
        let nics: Vec<String> = world
            .objects
            .interfaces
            .iter()
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(nics, ["pa.eth0"]);
        assert_eq!(world.objects.l2networks.len(), 1, "segments stay whole");
    }

    let topo = Topology::new(
        &format!("jn-e2e{}", std::process::id()),
        &["node-a".to_owned(), "node-b".to_owned()],
    )
    .unwrap();
    let nodes: Vec<NodeDaemon> = ["node-a", "node-b"]
        .iter()
        .map(|n| start_node(&cp, &topo, n, dir, "juneau-e2e"))
        .collect();
    let (pause, busybox) = containerd::test_images(&dir.join("images"));
    let runtimes: Vec<Containerd> = ["node-a", "node-b"]
        .iter()
        .zip(&nodes)
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

    // The sandboxes: containerd runs CNI ADD with the Pod's identity from CRI.
    let uid = |name: &str| cp.kubectl_ok(&["get", "pod", name, "-o", "jsonpath={.metadata.uid}"]);
    let mut sandboxes = Vec::new();
    for (rt, (name, daemon)) in runtimes.iter().zip(["pa", "pb"].iter().zip(&nodes)) {
        let id = rt.run_pod("default", name, &uid(name)).unwrap_or_else(|e| {
            panic!(
                "RunPodSandbox {name}: {e}\ncontainerd: {}\ndaemon: {}",
                rt.log_tail(),
                std::fs::read_to_string(&daemon.log).unwrap_or_default()
            )
        });
        sandboxes.push(id);
    }
    let (_, ip_a) = runtimes[0].pod_network(&sandboxes[0]);
    let (_, ip_b) = runtimes[1].pod_network(&sandboxes[1]);
    // The runtime reports the address the controller allocated (the CNI result's).
    assert_eq!(format!("{ip_a}/24"), addr_a);
    assert_eq!(format!("{ip_b}/24"), addr_b);
    let endpoints = items(&cp, "networkendpoints");
    for (ep, node) in [("pa.eth0", "node-a"), ("pb.eth0", "node-b")] {
        let e = named(&endpoints, ep).unwrap_or_else(|| panic!("no {ep}: {endpoints:?}"));
        assert_eq!(e["spec"]["nodeName"], node, "{e}");
    }

    // Containers in the sandboxes reach each other across the Nodes: every reply.
    let ctr_a = runtimes[0].run_busybox(&sandboxes[0], "pa");
    let _ctr_b = runtimes[1].run_busybox(&sandboxes[1], "pb");
    runtimes[0].assert_pings(&ctr_a, &ip_b);

    // Removing a sandbox runs CNI DEL: pa's NetworkEndpoint goes, pb's stays.
    runtimes[0].remove_pod(&sandboxes[0]);
    wait_for(
        Duration::from_secs(20),
        || {
            format!(
                "pa.eth0's NetworkEndpoint outlived its sandbox: {:?}",
                items(&cp, "networkendpoints")
            )
        },
        || {
            named(&items(&cp, "networkendpoints"), "pa.eth0")
                .is_none()
                .then_some(())
        },
    );
    assert!(named(&items(&cp, "networkendpoints"), "pb.eth0").is_some());
    // The DEL came from containerd and reached node-a's daemon (the veth itself goes
    // with the Pod namespace either way).
    wait_for(
        Duration::from_secs(10),
        || {
            format!(
                "no DEL of default/pa in node-a's daemon log:\n{}",
                std::fs::read_to_string(&nodes[0].log).unwrap_or_default()
            )
        },
        || {
            std::fs::read_to_string(&nodes[0].log)
                .unwrap_or_default()
                .lines()
                .any(|l| {
                    l.contains("CNI request served")
                        && l.contains("command=DEL")
                        && l.contains("default/pa")
                })
                .then_some(())
        },
    );

    // Runtimes first (their sandboxes' DEL needs the daemons), then the daemons, the
    // Nodes, the controller and the API server; the folder last.
    drop(runtimes);
    drop(nodes);
    drop(topo);
}
