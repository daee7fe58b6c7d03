//! Juneau's API against a real kube-apiserver (etcd and kube-apiserver built from their
//! Go modules): the CRDs as the server takes them, and what kubectl prints for them.
#[path = "common/control_plane.rs"]
mod control_plane;

use control_plane::ControlPlane;

fn apply(cp: &ControlPlane, yaml: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(control_plane::tool("k8s", "kubectl"))
        .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

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
    let crds =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/kind/crds.yaml")).unwrap();
    let out = apply(&cp, &crds);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kind/crds.yaml refused: {stderr}");
    assert!(
        !stderr.contains("Warning"),
        "the server warned about kind/crds.yaml: {stderr}"
    );
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd",
        "--all",
    ]);
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
    let out = apply(
        &cp,
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
