//! Juneau's API against a real kube-apiserver (etcd and kube-apiserver built from their
//! Go modules): the CRDs as the server takes them, and what kubectl prints for them.
#[path = "common/control_plane.rs"]
mod control_plane;

use control_plane::{ControlPlane, Owned};

/// The header line of `kubectl get`, split into column names.
fn header(table: &str) -> Vec<String> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn l2_03_eip_07_the_crds_are_accepted_and_kubectl_prints_the_seed_columns() {
    let cp = ControlPlane::start();
    cp.install_crds();
    // L2-03: cluster-scoped, short name l2net.
    assert_eq!(
        cp.kubectl_ok(&[
            "get",
            "crd",
            "l2networks.juneau.loutres.me",
            "-o",
            "jsonpath={.spec.scope}"
        ]),
        "Cluster"
    );
    let out = cp.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: lab-net}\n\
         spec: {vpc: tenant-a, cidr: 10.70.0.0/24, gateway: {}}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: NetworkInterface\n\
         metadata: {name: web.eth0, namespace: default}\n\
         spec: {interface: eth0, l2Network: lab-net, podRef: {name: web}, nodeName: node-a}\n",
    );
    assert!(
        out.status.success(),
        "objects refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Status through the status subresource, as the controller writes it.
    cp.kubectl_ok(&[
        "patch",
        "networkinterface",
        "web.eth0",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"address":"10.70.0.2/24","phase":"Ready"}}"#,
    ]);
    let l2 = cp.kubectl_ok(&["get", "l2net"]);
    assert_eq!(header(&l2), ["NAME", "VPC", "CIDR", "MTU", "READY"], "{l2}");
    assert!(
        l2.lines()
            .nth(1)
            .is_some_and(|row| row.split_whitespace().take(3).eq([
                "lab-net",
                "tenant-a",
                "10.70.0.0/24"
            ])),
        "{l2}"
    );
    // EIP-07: the NetworkInterface columns, in the seed's order.
    let nics = cp.kubectl_ok(&["get", "networkinterface", "-n", "default"]);
    assert_eq!(
        header(&nics),
        [
            "NAME",
            "NODE",
            "SUBNET",
            "L2NETWORK",
            "ELASTICIP",
            "ADDRESS",
            "PHASE"
        ],
        "{nics}"
    );
    // Cells by the header's column positions: empty ones (no Subnet, no ElasticIP) stay
    // blank.
    let row = nics.lines().nth(1).unwrap_or_default();
    let cell = |col: &str| -> String {
        let start = nics.find(col).unwrap();
        row.get(start..)
            .filter(|r| !r.starts_with(' '))
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(
        [
            "NAME",
            "NODE",
            "SUBNET",
            "L2NETWORK",
            "ELASTICIP",
            "ADDRESS",
            "PHASE"
        ]
        .map(cell),
        [
            "web.eth0",
            "node-a",
            "",
            "lab-net",
            "",
            "10.70.0.2/24",
            "Ready"
        ],
        "{nics}"
    );
}

/// The controller's reconcilers (segments, NICs and IPAM, RouteTables) over the real API:
/// one pass writes the L2Network status, the Pod's NetworkInterface with its address, and
/// the connected route (L2-14); a second pass, as a restarted controller makes, changes
/// nothing.
#[test]
fn l2_06_l2_14_the_controller_writes_through_the_real_api_a_second_pass_changes_nothing_and_a_lapsed_lease_writes_nothing()
 {
    use juneau::{cluster::Cluster, controller, store::k8s::KubeCluster};
    let cp = ControlPlane::start();
    cp.install_crds();
    let out = cp.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: RouteTable\nmetadata: {name: tenant-a}\nspec: {vpc: tenant-a}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: lab-net}\n\
         spec: {vpc: tenant-a, cidr: 10.70.0.0/24, gateway: {}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{\"interface\": \"eth0\", \"l2Network\": \"lab-net\"}]'\n\
         spec:\n  nodeName: node-a\n  containers: [{name: c, image: busybox}]\n",
    );
    assert!(
        out.status.success(),
        "objects refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cluster = KubeCluster::connect(Some(&cp.kubeconfig), juneau::store::k8s::CONTROLLER)
        .expect("connect with the kubeconfig");
    // Without the default Subnet, which takes passes of its own (made, then given a
    // status): the apiserver_rbac test makes it.
    let cfg = controller::Config {
        default_subnet_cidr: None,
        ..Default::default()
    };
    assert!(
        controller::run_once(&cluster, &cfg).unwrap(),
        "the first pass writes"
    );
    let vni = cp.kubectl_ok(&["get", "l2net", "lab-net", "-o", "jsonpath={.status.vni}"]);
    assert!(vni.parse::<u32>().is_ok_and(|v| v > 0), "VNI {vni:?}");
    let nic = cp.kubectl_ok(&[
        "get",
        "networkinterface",
        "web.eth0",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.l2Network} {.status.address}",
    ]);
    assert_eq!(nic, "lab-net 10.70.0.2/24");
    let routes = cp.kubectl_ok(&[
        "get",
        "routetable",
        "tenant-a",
        "-o",
        "jsonpath={.spec.routes[*].dst}",
    ]);
    assert_eq!(routes, "10.70.0.0/24", "the connected route (L2-14)");
    // What a restarted controller does first: one more pass over the same cluster.
    assert!(
        !controller::run_once(&cluster, &cfg).unwrap(),
        "a second pass changed something"
    );
    let (world, _) = cluster.read().unwrap();
    assert_eq!(world.pods.len(), 1);
    assert_eq!(world.objects.interfaces.len(), 1);

    // A replica whose Lease lapsed (not renewed within its duration) writes nothing: its
    // pass stops at the first write instead of racing the replica that took over.
    let lease = std::time::Duration::from_secs(1);
    assert!(
        cluster
            .hold_lease("default", "fence-test", "replica-a", lease)
            .unwrap()
    );
    std::thread::sleep(lease + std::time::Duration::from_millis(200));
    let out = cp.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: api\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{\"interface\": \"eth0\", \"l2Network\": \"lab-net\"}]'\n\
         spec:\n  nodeName: node-a\n  containers: [{name: c, image: busybox}]\n",
    );
    assert!(out.status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while cluster.read().unwrap().0.pods.len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the new Pod never showed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let refused = controller::run_once(&cluster, &cfg).expect_err("a replica past its Lease wrote");
    assert!(refused.to_string().contains("Lease"), "{refused}");
    let nic = cp.kubectl(&["get", "networkinterface", "api.eth0", "-n", "default"]);
    assert!(
        !nic.status.success(),
        "the NIC was written after the Lease lapsed"
    );
    // Renewed, it writes again.
    assert!(
        cluster
            .hold_lease("default", "fence-test", "replica-a", lease)
            .unwrap()
    );
    assert!(controller::run_once(&cluster, &cfg).unwrap());
    cp.kubectl_ok(&["get", "networkinterface", "api.eth0", "-n", "default"]);
}

/// `juneau controller` as a process, as its Deployment runs it: objects applied after it
/// started are reconciled (its passes follow the API's watches, not a timer).
#[test]
fn l2_06_juneau_controller_follows_the_api_and_writes_a_pods_nic() {
    let cp = ControlPlane::start();
    cp.install_crds();
    // The leader-election Lease's namespace, as kind/namespace.yaml makes it.
    cp.kubectl_ok(&["create", "namespace", "juneau-system"]);
    let controller = Owned::spawn(
        std::process::Command::new(env!("CARGO_BIN_EXE_juneau"))
            // A long Lease: renewals (a third of it) never drive a pass within this test,
            // so only the watches can.
            .args(["controller", "--lease-duration", "120", "--kubeconfig"])
            .arg(&cp.kubeconfig)
            .stderr(std::process::Stdio::null()),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while cp
        .kubectl(&["get", "lease", "juneau-controller", "-n", "juneau-system"])
        .stdout
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the controller never led"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let out = cp.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-b}\nspec: {}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: b-net}\n\
         spec: {vpc: tenant-b, cidr: 10.71.0.0/24}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: db\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{\"interface\": \"eth0\", \"l2Network\": \"b-net\"}]'\n\
         spec:\n  nodeName: node-b\n  containers: [{name: c, image: busybox}]\n",
    );
    assert!(out.status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let address = loop {
        let out = cp.kubectl(&[
            "get",
            "networkinterface",
            "db.eth0",
            "-n",
            "default",
            "-o",
            "jsonpath={.status.address}",
        ]);
        let address = String::from_utf8_lossy(&out.stdout).into_owned();
        if !address.is_empty() || std::time::Instant::now() > deadline {
            break address;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    drop(controller);
    assert_eq!(
        address, "10.71.0.1/24",
        "no address written within 10 s of the change"
    );
}

/// Two `juneau controller` replicas, as the Deployment runs them: one holds the Lease and
/// writes, the other only waits; when the leader dies the other takes the Lease over and
/// reconciles what came meanwhile.
#[test]
fn l2_06_two_controller_replicas_one_acts_and_the_other_takes_over() {
    use std::{
        process::{Command, Stdio},
        time::{Duration, Instant},
    };
    /// A replica and its log (the log goes after the process).
    struct Replica {
        _process: Owned,
        log: std::path::PathBuf,
    }
    impl Drop for Replica {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.log);
        }
    }
    let cp = ControlPlane::start();
    cp.install_crds();
    cp.kubectl_ok(&["create", "namespace", "juneau-system"]);
    let start = |name: &str| {
        let log = std::env::temp_dir().join(format!("juneau-{name}-{}.log", std::process::id()));
        let process = Owned::spawn(
            Command::new(env!("CARGO_BIN_EXE_juneau"))
                .args([
                    "controller",
                    "--lease-duration",
                    "6",
                    "--identity",
                    name,
                    "--kubeconfig",
                ])
                .arg(&cp.kubeconfig)
                .stderr(std::fs::File::create(&log).unwrap())
                .stdout(Stdio::null()),
        );
        Replica {
            _process: process,
            log,
        }
    };
    let holder = || {
        String::from_utf8_lossy(
            &cp.kubectl(&[
                "get",
                "lease",
                "juneau-controller",
                "-n",
                "juneau-system",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ])
            .stdout,
        )
        .into_owned()
    };
    let wait_for = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < deadline, "{what} within 30 s");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let mut replicas = vec![start("replica-a"), start("replica-b")];
    wait_for("a holder", &|| !holder().is_empty());
    let address = |pod: &str| {
        String::from_utf8_lossy(
            &cp.kubectl(&[
                "get",
                "networkinterface",
                &format!("{pod}.eth0"),
                "-n",
                "default",
                "-o",
                "jsonpath={.status.address}",
            ])
            .stdout,
        )
        .into_owned()
    };
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
             juneau.loutres.me/networks: '[{{\"interface\": \"eth0\", \"l2Network\": \"c-net\"}}]'\n\
             spec:\n  nodeName: node-a\n  containers: [{{name: c, image: busybox}}]\n"
        )
    };
    let out = cp.apply(
        &format!(
            "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {{name: tenant-c}}\nspec: {{}}\n---\n\
             apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {{name: c-net}}\n\
             spec: {{vpc: tenant-c, cidr: 10.72.0.0/24}}\n---\n{}",
            pod("one")
        ),
    );
    assert!(out.status.success());
    wait_for("the first Pod's NIC", &|| !address("one").is_empty());
    let leader = holder();
    let (lead, other) = if leader == "replica-a" {
        (0, 1)
    } else {
        (1, 0)
    };
    let wrote = |r: &Replica| {
        std::fs::read_to_string(&r.log)
            .unwrap()
            .contains("pass wrote changes")
    };
    assert!(wrote(&replicas[lead]), "the leader {leader} wrote nothing");
    assert!(
        !wrote(&replicas[other]),
        "the replica that does not lead wrote"
    );
    // The leader dies; the other takes over after the Lease's 6 s and does the work.
    drop(replicas.remove(lead));
    assert!(cp.apply(&pod("two")).status.success());
    wait_for("the second Pod's NIC from the new leader", &|| {
        !address("two").is_empty()
    });
    assert_ne!(holder(), leader, "the Lease changed hands");
    assert!(wrote(&replicas[0]));
}
