//! Juneau deployed by its own manifests on real Nodes (issue 28): `kind/`'s CRDs,
//! namespace, RBAC, DaemonSet (the node daemon, its CNI install container, the BGP
//! speaker) and Deployments (controller, webhook) applied to two kubelet Nodes; the
//! DaemonSet and ReplicaSets made into Pods by kube-controller-manager, bound by
//! kube-scheduler, run by each kubelet from the image `juneau:dev` built here.
//! `common/manifest_bed.rs` says what of a cluster the bed provides and which fields of
//! the manifests it changes.
#[path = "common/containerd.rs"]
mod containerd;
#[path = "common/control_plane.rs"]
mod control_plane;
#[path = "common/kubelet.rs"]
mod kubelet;
#[path = "common/kubelet_bed.rs"]
mod kubelet_bed;
#[path = "common/manifest_bed.rs"]
mod manifest_bed;
#[path = "common/node_bed.rs"]
mod node_bed;
#[path = "common/relay.rs"]
mod relay;
#[path = "common/webhook.rs"]
mod webhook;

use std::{process::Command, time::Duration};

use kubelet_bed::{NODES, json};
use manifest_bed::ManifestBed;
use node_bed::wait_for;

/// A busybox Pod on the default Subnet, on `node`.
fn pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  \
         containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    )
}

/// The juneau-system Pods of `app` that are Ready: (Pod, Node, ServiceAccount).
fn ready_pods(bed: &ManifestBed, app: &str) -> Vec<(String, String, String)> {
    bed.pods_of(app)
        .iter()
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .map(|p| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&p["metadata"]["name"]),
                s(&p["spec"]["nodeName"]),
                s(&p["spec"]["serviceAccountName"]),
            )
        })
        .collect()
}

#[test]
fn mx_02_l2_08_juneau_runs_from_its_kind_manifests_on_kubelet_nodes() {
    // Each Node also has a NIC Juneau was not told about (MX-02: it stays bare).
    let bed = ManifestBed::start(|_, ns| {
        for args in [
            vec![
                "link", "add", "extra0", "type", "veth", "peer", "name", "extra1",
            ],
            vec!["link", "set", "extra0", "up"],
        ] {
            let st = Command::new("ip")
                .args(["-n", ns])
                .args(&args)
                .status()
                .unwrap();
            assert!(st.success(), "ip {args:?} in {ns}");
        }
    });
    let cp = &bed.cp;

    // One daemon per Node, two controllers and two webhooks, all Ready, each under
    // the ServiceAccount its manifest names.
    for (app, count, account) in [
        ("juneau-node", 2, "juneau-node"),
        ("juneau-controller", 2, "juneau-controller"),
        ("juneau-webhook", 2, "juneau-webhook"),
    ] {
        let pods = ready_pods(&bed, app);
        assert_eq!(pods.len(), count, "{app}: {pods:?}\n{}", bed.describe());
        assert!(pods.iter().all(|p| p.2 == account), "{app}: {pods:?}");
        if app == "juneau-node" {
            let mut nodes: Vec<&str> = pods.iter().map(|p| p.1.as_str()).collect();
            nodes.sort();
            assert_eq!(nodes, NODES, "one daemon on every Node");
        }
    }
    // The install container wrote each Node's plugin and conflist into that Node's
    // own folder, the conflist naming the socket its daemon serves.
    for node in NODES {
        let own = bed.dir.0.join(node);
        assert!(
            own.join("opt/cni/bin/juneau-cni").exists(),
            "{node}'s plugin"
        );
        let conf = std::fs::read_to_string(own.join("etc/cni/net.d/10-juneau.conflist"))
            .unwrap_or_else(|e| panic!("{node}'s conflist: {e}"));
        let socket = bed.dir.0.join("host/run/juneau/cni.sock");
        assert!(
            conf.contains(&format!("\"socket\":\"{}\"", socket.display())),
            "{node}'s conflist names its daemon's socket as the runtime sees it: {conf}"
        );
        assert!(
            own.join("run/juneau/cni.sock").exists(),
            "{node}'s daemon socket"
        );
        // Its datapath pinned in the Node's bpffs (the Bidirectional mount).
        assert!(
            std::fs::read_dir(own.join("sys/fs/bpf/juneau")).is_ok_and(|mut d| d.next().is_some()),
            "{node}'s pins"
        );
    }

    // Pods on the default Subnet of both Nodes: Ready with Juneau's addresses, and
    // reaching each other across the Nodes.
    bed.apply(&format!(
        "{}---\n{}",
        pod("pa", "node-a"),
        pod("pb", "node-b")
    ));
    let ips: Vec<Vec<String>> = ["pa", "pb"].iter().map(|p| bed.wait_ready(p)).collect();
    for ip in ips.iter().flatten() {
        assert!(
            ip.starts_with("10.16."),
            "a default Subnet address: {ips:?}"
        );
    }
    kubelet_bed::assert_pings(&bed.runtimes[0], "pa", &ips[1][0]);

    // The webhook Pods serve the API server through their Service (L2-08, with the
    // Service CIDR of this cluster): an L2Network over it is refused by Juneau's rule,
    // one beside it admitted.
    bed.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n",
    );
    let refused = cp.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: over}\n\
         spec: {vpc: tenant-a, cidr: 10.0.0.0/25}\n",
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "admitted over the Service CIDR");
    assert!(
        said.contains("validate.juneau.loutres.me")
            && said.contains("overlaps the cluster's Service CIDR 10.0.0.0/24"),
        "{said}"
    );
    bed.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: beside}\n\
         spec: {vpc: tenant-a, cidr: 10.71.0.0/24}\n",
    );

    // MX-02: the daemon's programs are on its uplink and Pod ports, none on the NIC
    // it was not given.
    let (with_programs, rows) = kubelet_bed::with_programs(&bed.topo, "node-a");
    let programs_on = |iface: &str| with_programs.iter().any(|i| i == iface);
    assert!(programs_on("ul0"), "{rows}");
    assert!(!programs_on("extra0"), "{rows}");

    // Who did what: each component as its own ServiceAccount.
    let events = cp.audit_events();
    for account in ["juneau-node", "juneau-controller", "juneau-webhook"] {
        let user = format!("system:serviceaccount:juneau-system:{account}");
        let served = events
            .iter()
            .filter(|e| {
                e["user"]["username"] == user.as_str()
                    && e["responseStatus"]["code"]
                        .as_u64()
                        .is_some_and(|c| c < 300)
            })
            .count();
        assert!(served > 0, "no request answered for {user}");
    }
    // The controller's Lease is held by one of its Pods.
    let holder = wait_for(
        Duration::from_secs(30),
        || "no holder of the controller's Lease".into(),
        || {
            let l = json(
                cp,
                &["get", "lease", "juneau-controller", "-n", "juneau-system"],
            );
            l["spec"]["holderIdentity"].as_str().map(str::to_owned)
        },
    );
    assert!(
        ready_pods(&bed, "juneau-controller")
            .iter()
            .any(|p| p.0 == holder),
        "Lease holder {holder}"
    );

    // kubectl delete: the daemon in its Pod serves the DEL; the endpoints go.
    cp.kubectl_ok(&["delete", "pod", "pa", "pb", "-n", "default", "--wait=true"]);
    wait_for(
        Duration::from_secs(30),
        || format!("endpoints outlived their Pods:\n{}", bed.describe()),
        || {
            json(cp, &["get", "networkendpoints", "-n", "default"])["items"]
                .as_array()
                .is_some_and(|a| a.is_empty())
                .then_some(())
        },
    );
    let log = bed.log_of("juneau-node", "node-a", "node");
    assert!(
        log.contains("CNI request served") && log.contains("command=DEL"),
        "{log}"
    );
}
