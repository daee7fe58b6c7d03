//! ElasticIPs through a real kube-apiserver: the controller's passes write the
//! ExternalNetwork's networkID, the ElasticIP's address and holder, the holder NIC and
//! the ARPAdvertisement that follows its Node, and kubectl prints the seed's columns.
#[path = "common/control_plane.rs"]
mod control_plane;

use control_plane::ControlPlane;
use juneau::{controller, store::k8s::KubeCluster};

fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn eip_04_eip_07_eip_11_eip_19_eip_20_eip_21_eip_25_the_controller_writes_elastic_ips_through_the_real_api()
 {
    let cp = ControlPlane::start();
    cp.install_crds();
    let out = cp.apply(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: AddressPool\nmetadata: {name: lan}\n\
         spec: {advertiseMode: arp, addresses: [192.0.2.10-192.0.2.20]}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: ExternalNetwork\nmetadata: {name: ext-net}\n\
         spec: {type: arp, addressPools: [lan]}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: ElasticIP\nmetadata: {name: web-eip, namespace: default}\n\
         spec: {externalNetwork: ext-net}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/elastic-ip: web-eip\n\
         spec:\n  nodeName: node-a\n  containers: [{name: c, image: busybox}]\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: web2\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/elastic-ip: web-eip\n  labels:\n    \
         kubevirt.io: virt-launcher\n    vm.kubevirt.io/name: web\n\
         spec:\n  nodeName: node-b\n  containers: [{name: c, image: busybox}]\n",
    );
    assert!(
        out.status.success(),
        "objects refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cluster = KubeCluster::connect(Some(&cp.kubeconfig), juneau::store::k8s::CONTROLLER)
        .expect("connect with the kubeconfig");
    let cfg = controller::Config {
        default_subnet_cidr: None,
        ..Default::default()
    };
    // networkID, then the address, then the NIC and the holder: a few passes, then none.
    let mut passes = 0;
    while controller::run_once(&cluster, &cfg).unwrap() {
        passes += 1;
        assert!(passes < 6, "no fixed point");
    }
    let id = cp.kubectl_ok(&[
        "get",
        "externalnetwork",
        "ext-net",
        "-o",
        "jsonpath={.status.networkID}",
    ]);
    assert!(id.parse::<u32>().is_ok_and(|v| v > 0), "networkID {id:?}");
    let eips = rows(&cp.kubectl_ok(&["get", "elasticip", "-n", "default"]));
    assert_eq!(
        eips,
        vec![
            vec![
                "NAME",
                "EXTERNALNETWORK",
                "ADDRESS",
                "ATTACHMENTKIND",
                "ATTACHMENT",
                "PHASE",
                "ALLOCATED",
                "ATTACHED"
            ],
            vec![
                "web-eip",
                "ext-net",
                "192.0.2.10",
                "NetworkInterface",
                "web.eth0",
                "Attached",
                "True",
                "True"
            ]
        ]
    );
    let nic = cp.kubectl_ok(&[
        "get",
        "networkinterface",
        "web.eth0",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.elasticIP} {.status.address} {.status.routes[0].gw} {.status.routes[0].onLink}",
    ]);
    assert_eq!(nic, "web-eip 192.0.2.10/32 169.254.0.1 true");
    // EIP-25: describe says who carries the address; EIP-21: trace refuses both NICs.
    let juneau = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
            .args(args)
            .args(["--kubeconfig".as_ref(), cp.kubeconfig.as_os_str()])
            .output()
            .expect("run kubectl-juneau");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let (ok, holder, err) = juneau(&["describe", "pod", "web"]);
    assert!(ok, "{err}");
    assert!(
        holder.contains("ElasticIP web-eip (direct, 192.0.2.10, networkID ")
            && holder.contains(", carried by this NIC)"),
        "{holder}"
    );
    let (ok, waiter, err) = juneau(&["describe", "pod", "web2", "-n", "default"]);
    assert!(ok, "{err}");
    assert!(
        waiter.contains("carried by NetworkInterface web.eth0)")
            && waiter.contains("WaitingForElasticIP"),
        "{waiter}"
    );
    // EIP-20: a virt-launcher Pod's NIC carries its VM's identity, from its labels.
    assert_eq!(
        cp.kubectl_ok(&[
            "get",
            "networkinterface",
            "web2.eth0",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.allocationIdentity}",
        ]),
        "vmi.web"
    );
    for (from, to) in [("web", "web2"), ("web2.eth0", "web")] {
        let (ok, out, err) = juneau(&["trace", from, to]);
        assert!(!ok, "{out}");
        assert!(
            err.contains("tracing such a NIC is not supported yet"),
            "{err}"
        );
    }
    let ads = rows(&cp.kubectl_ok(&["get", "arpadvertisement"]));
    assert_eq!(
        ads[0],
        ["NAME", "EXTERNALNETWORK", "ADDRESS", "NODE", "AGE"]
    );
    assert_eq!(
        ads[1][..4],
        ["eip-default-web-eip", "ext-net", "192.0.2.10", "node-a"]
    );
    // EIP-19: deleted while the NIC names it, the ElasticIP stays (its finalizer) with
    // its address, and says why.
    let finalizers = cp.kubectl_ok(&[
        "get",
        "elasticip",
        "web-eip",
        "-n",
        "default",
        "-o",
        "jsonpath={.metadata.finalizers}",
    ]);
    assert!(
        finalizers.contains("elasticip.juneau.loutres.me/allocation-claim"),
        "{finalizers}"
    );
    cp.kubectl_ok(&[
        "delete",
        "elasticip",
        "web-eip",
        "-n",
        "default",
        "--wait=false",
    ]);
    // The controller's cache may see the deletion a pass later than kubectl returns:
    // passes until it says why the ElasticIP stays (10 s at most).
    let read = || {
        cp.kubectl_ok(&[
            "get",
            "elasticip",
            "web-eip",
            "-n",
            "default",
            "-o",
            "jsonpath={.status.address} {.status.conditions[?(@.type==\"Allocated\")].reason}",
        ])
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let held = loop {
        while controller::run_once(&cluster, &cfg).unwrap() {}
        let held = read();
        if held == "192.0.2.10 WaitingForNetworkInterfaces" || std::time::Instant::now() > deadline
        {
            break held;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(held, "192.0.2.10 WaitingForNetworkInterfaces");
    // The Pod gone: its NIC goes, then the ElasticIP, and no Node answers.
    cp.kubectl_ok(&[
        "delete",
        "pod",
        "web",
        "web2",
        "-n",
        "default",
        "--grace-period=0",
        "--force",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // The NIC gone: the deletion completes.
    loop {
        controller::run_once(&cluster, &cfg).unwrap();
        if !cp
            .kubectl(&["get", "elasticip", "web-eip", "-n", "default"])
            .status
            .success()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ElasticIP was never let go"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(rows(&cp.kubectl_ok(&["get", "arpadvertisement"])).len(), 0);
}
