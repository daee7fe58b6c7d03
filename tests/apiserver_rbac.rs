//! The manifests of `kind/` against the real API server: every one passes a server-side
//! dry run, and the components work with the ServiceAccounts and roles they bind (tokens
//! from TokenRequest, never admin); without one verb of its role a component fails
//! with a message naming what it may not do.
#[path = "common/control_plane.rs"]
mod control_plane;

use control_plane::ControlPlane;
use juneau::{
    cluster::Cluster,
    controller,
    store::k8s::{CONTROLLER, KubeCluster, NODE},
};

#[test]
fn mx_01_every_manifest_passes_a_server_side_dry_run() {
    let cp = ControlPlane::start();
    cp.install_crds_and(&["namespace.yaml"]);
    for f in [
        "rbac.yaml",
        "controller.yaml",
        "webhook.yaml",
        "daemonset.yaml",
    ] {
        let out = cp.kubectl(&[
            "apply",
            "--dry-run=server",
            "-f",
            &ControlPlane::manifest(f),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kind/{f}: {stderr}");
        assert!(stderr.trim().is_empty(), "kind/{f} warned: {stderr}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("(server dry run)"),
            "kind/{f}: nothing applied"
        );
    }
}

/// A kubeconfig for one of the manifests' ServiceAccounts.
fn as_account(cp: &ControlPlane, account: &str) -> std::path::PathBuf {
    let token = cp.kubectl_ok(&["create", "token", account, "-n", "juneau-system"]);
    cp.kubeconfig_for_token(account, token.trim())
}

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{{\"interface\": \"eth0\", \"l2Network\": \"lab-net\"}}]'\n\
         spec:\n  nodeName: node-a\n  containers: [{{name: c, image: busybox}}]\n"
    )
}

fn apply_text(cp: &ControlPlane, yaml: &str) {
    let out = cp.apply(yaml);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn l2_06_the_components_work_with_their_service_accounts_and_fail_clearly_without_a_verb() {
    let cp = ControlPlane::start();
    cp.install_crds_and(&["namespace.yaml", "rbac.yaml"]);
    apply_text(
        &cp,
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: RouteTable\nmetadata: {name: tenant-a}\nspec: {vpc: tenant-a}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: lab-net}\n\
         spec: {vpc: tenant-a, cidr: 10.70.0.0/24, gateway: {}}\n",
    );
    apply_text(&cp, &pod("web"));
    // Defaults: the default Vpc is made too (the role's create verb).
    let cfg = controller::Config::default();
    // The controller as juneau-controller.
    let ctl = KubeCluster::connect(Some(&as_account(&cp, "juneau-controller")), CONTROLLER)
        .expect("connect as juneau-controller");
    assert!(controller::run_once(&ctl, &cfg).expect("the controller's role suffices"));
    let (world, _) = ctl.read().unwrap();
    assert!(
        world.objects.vpc("default").is_some(),
        "the default Vpc made"
    );
    let nic = world
        .objects
        .interfaces
        .first()
        .expect("a NetworkInterface");
    assert_eq!(
        nic.status
            .as_ref()
            .and_then(|s| s.address)
            .map(|a| a.to_string()),
        Some("10.70.0.2/24".to_owned())
    );
    // The node daemon's writes as juneau-node; the webhook's reads as juneau-webhook.
    let node = KubeCluster::connect(Some(&as_account(&cp, "juneau-node")), NODE).unwrap();
    let ep = juneau::api::NetworkEndpoint::new(
        "web.eth0",
        juneau::api::networkendpoint::NetworkEndpointSpec {
            kind: "Pod".into(),
            l2_network: Some("lab-net".into()),
            address: "10.70.0.2/24".parse().ok(),
            mac_address: "02:00:00:00:00:01".parse().ok(),
            node_name: "node-a".into(),
            node_ip: "10.99.0.1".parse().ok(),
            ..Default::default()
        },
    );
    let mut ep = ep;
    ep.metadata.namespace = Some("default".into());
    node.put_endpoint(ep)
        .expect("the node's role writes endpoints");
    node.delete_endpoint("default", "web.eth0")
        .expect("and deletes them");
    let webhook =
        KubeCluster::connect(Some(&as_account(&cp, "juneau-webhook")), CONTROLLER).unwrap();
    assert_eq!(webhook.read().unwrap().0.objects.l2networks.len(), 1);
    // The node may not write what the controller writes.
    let mut bad = controller::reconcile(&node.read().unwrap().0, &cfg);
    bad.interfaces[0].status.as_mut().unwrap().phase = "Tampered".into();
    let e = node
        .apply(&bad)
        .expect_err("the node wrote a NetworkInterface status");
    assert!(
        e.to_string().contains("forbidden"),
        "not refused by RBAC: {e}"
    );
    // One verb less: the controller's patch of NetworkInterface status.
    let roles = cp.kubectl_ok(&["get", "clusterrole", "juneau-controller", "-o", "json"]);
    let role: serde_json::Value = serde_json::from_str(&roles).unwrap();
    let index = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .position(|r| r["resources"][0] == "networkinterfaces/status")
        .expect("a rule for networkinterfaces/status");
    cp.kubectl_ok(&[
        "patch",
        "clusterrole",
        "juneau-controller",
        "--type=json",
        "-p",
        &format!(r#"[{{"op":"remove","path":"/rules/{index}"}}]"#),
    ]);
    // RBAC changes take effect within a moment: wait until the API says no.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while cp
        .kubectl(&[
            "auth",
            "can-i",
            "patch",
            "networkinterfaces.juneau.loutres.me",
            "--subresource=status",
            "--as=system:serviceaccount:juneau-system:juneau-controller",
        ])
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the role change never took effect"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    apply_text(&cp, &pod("db"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let e = loop {
        match controller::run_once(&ctl, &cfg) {
            Err(e) => break e.to_string(),
            Ok(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(300))
            }
            Ok(_) => panic!("the controller still wrote a status without the verb"),
        }
    };
    assert!(
        e.contains("status of db.eth0")
            && e.contains("cannot patch resource \"networkinterfaces/status\""),
        "{e}"
    );
}
