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
#[path = "common/kubelet_bed.rs"]
mod kubelet_bed;
#[path = "common/node_bed.rs"]
mod node_bed;
#[path = "common/relay.rs"]
mod relay;
#[path = "common/webhook.rs"]
mod webhook;

use std::time::Duration;

use control_plane::ControlPlane;
use kubelet_bed::{Bed, LAB_NET, NODES, json, names, node_of, ready_ips};
use node_bed::wait_for;

fn pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
         juneau.loutres.me/networks: '[{{\"interface\": \"eth0\", \"l2Network\": \"lab-net\"}}]'\n\
         spec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  \
         containers: [{{name: c, image: {img}, imagePullPolicy: Never}}]\n",
        img = containerd::BUSYBOX
    )
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
    kubelet_bed::assert_pings(&bed.runtimes[0], "pa", &ips[1][0]);

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
    // Each kubelet acted as its Node (`system:node:<name>`: the Node authorizer and
    // NodeRestriction), never as the admin: the API server's audit log says who sent
    // what.
    let events = cp.audit_events();
    let user = |e: &serde_json::Value| e["user"]["username"].as_str().unwrap_or("").to_owned();
    let from_kubelet = |e: &serde_json::Value| {
        e["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("kubelet/"))
    };
    for node in NODES {
        let me = format!("system:node:{node}");
        let statuses = events
            .iter()
            .filter(|e| {
                user(e) == me
                    && e["objectRef"]["resource"] == "pods"
                    && e["objectRef"]["subresource"] == "status"
                    && e["responseStatus"]["code"]
                        .as_u64()
                        .is_some_and(|c| c < 300)
            })
            .count();
        assert!(statuses > 0, "no Pod status written by {me}");
    }
    let others: Vec<String> = events
        .iter()
        .filter(|e| from_kubelet(e) && !user(e).starts_with("system:node:"))
        .map(user)
        .collect();
    assert!(others.is_empty(), "kubelet requests as {others:?}");
    let refused: Vec<String> = events
        .iter()
        .filter(|e| from_kubelet(e) && e["responseStatus"]["code"] == 403)
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect();
    eprintln!("kubelet requests refused by the Node authorizer: {refused:?}");
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
    probed_pod("web", "juneau.loutres.me/elastic-ip: web-eip")
}

/// Pod `name` on node-a with `annotation`, whose httpd answers the kubelet's probes
/// (readiness httpGet, liveness tcpSocket, every second; 3 s to answer, as the
/// machine's two cores are busy with both restarts).
fn probed_pod(name: &str, annotation: &str) -> String {
    probed_pod_on(name, annotation, 8080)
}

/// [`probed_pod`] whose probes ask `port` (its httpd listens on 8080).
fn probed_pod_on(name: &str, annotation: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    \
         {annotation}\n\
         spec:\n  nodeName: node-a\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    \
         image: {img}\n    imagePullPolicy: Never\n    \
         command: [/bin/busybox, sh, -c, '/bin/busybox mkdir -p /www && echo ok > /www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www']\n    \
         readinessProbe: {{httpGet: {{path: /, port: {port}}}, periodSeconds: 1, timeoutSeconds: 3, failureThreshold: 1}}\n    \
         livenessProbe: {{tcpSocket: {{port: {port}}}, periodSeconds: 1, timeoutSeconds: 3, failureThreshold: 3}}\n",
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

/// Failed probes of `pod`: the kubelet's Unhealthy events, each with its count.
fn unhealthy(cp: &ControlPlane, pod: &str) -> String {
    cp.kubectl_ok(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        &format!("involvedObject.name={pod},reason=Unhealthy"),
        "-o",
        "jsonpath={range .items[*]}{.message} (x{.count}){\"\\n\"}{end}",
    ])
    .trim()
    .to_owned()
}

/// The kubelet's probes (readiness httpGet, liveness tcpSocket, every second) reach a
/// direct ElasticIP Pod by its Node route (EIP-18) and a default-Subnet Pod by the
/// Node's door (`gw::node`), through a kubelet SIGKILL and restart and a containerd
/// one; an L2Network-eth0 Pod gets no Node route (L2-27), so its probes fail. Then
/// exactly the live Pods hold endpoints and veths, and deleting them leaves nothing.
#[test]
fn eip_18_l2_27_mx_01_probes_pass_through_a_kubelet_and_containerd_restart_and_nothing_leaks() {
    let mut bed = Bed::start(&format!("{LAB_NET}---\n{WEB}"));
    bed.apply(&format!(
        "{}---\n{}---\n{}---\n{}",
        web_pod(),
        pod("pb", "node-b"),
        probed_pod("pc", "example.com/on: default-subnet"),
        probed_pod(
            "pl2",
            r#"juneau.loutres.me/networks: '[{"interface": "eth0", "l2Network": "lab-net"}]'"#
        ),
    ));
    for p in ["web", "pb", "pc"] {
        bed.wait_ready(p);
    }
    let cp = &bed.cp;
    // pc is on the default Subnet (the controller's 10.16.0.0/16).
    let pc = ready_ips(cp, "pc").unwrap();
    assert!(pc[0].starts_with("10.16."), "{pc:?}");
    // L2-27: pl2 has its address but no Node route; its probes fail.
    let pl2 = nic_address(cp, "pl2").expect("pl2's address");
    wait_for(
        Duration::from_secs(30),
        || format!("pl2's probes never failed:\n{}", bed.describe()),
        || (!unhealthy(cp, "pl2").is_empty()).then_some(()),
    );
    assert!(ready_ips(cp, "pl2").is_none(), "pl2 became Ready");
    let routes = std::process::Command::new("ip")
        .args(["-n", node_of(&bed.topo, "node-a").ns.name(), "route"])
        .output()
        .unwrap();
    let routes = String::from_utf8_lossy(&routes.stdout).into_owned();
    assert!(routes.contains(&format!("{} dev", pc[0])), "{routes}");
    assert!(
        !routes.contains(&pl2),
        "an L2Network Pod got a Node route: {routes}"
    );
    let before: Vec<(String, u64)> = ["web", "pc"].iter().map(|p| readiness(cp, p)).collect();
    // A probe may have found the httpd not listening yet as its container started:
    // what counts is that none fails from here on.
    let failed_before: Vec<String> = ["web", "pc"].iter().map(|p| unhealthy(cp, p)).collect();
    assert!(before.iter().all(|b| b.1 == 0), "{before:?}");
    let sandboxes = |bed: &Bed| bed.runtimes[0].crictl_ok(&["pods", "--name", "web", "-q"]);
    let sandbox = sandboxes(&bed);
    cp.kubectl_ok(&["delete", "pod", "pl2", "-n", "default", "--wait=true"]);

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
    for ((p, before), failed) in ["web", "pc"].iter().zip(&before).zip(&failed_before) {
        let after = readiness(cp, p);
        assert!(!after.0.is_empty(), "{p} is not Ready: {}", bed.describe());
        assert_eq!(after.1, 0, "{p} restarted");
        assert_eq!(
            &unhealthy(cp, p),
            failed,
            "{p}'s probes failed across the restarts"
        );
        eprintln!(
            "{p} Ready since {} before the restarts, {} after",
            before.0, after.0
        );
    }
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

/// L2-27 with the webhook's `--enable-probe-rewrite`: the httpGet and tcpSocket probes
/// of an L2Network-eth0 Pod and of a Pod on another Vpc's Subnet (no Node route to
/// either) are rewritten at admission into httpGets on the Node daemon's loopback
/// port, which runs them inside each Pod's namespace: both Pods become Ready. A direct
/// ElasticIP Pod keeps its probes (EIP-18: its Node route carries them). A Pod whose
/// probes ask a port nothing listens on stays unready, and the kubelet's event says
/// the daemon answered 502 (refused).
#[test]
fn l2_27_eip_18_rewritten_probes_of_l2network_and_tenant_vpc_pods_run_in_their_namespace() {
    // An L2Network eth0 needs a gateway (the webhook refuses lab-net's: no default route).
    let tenant = "apiVersion: juneau.loutres.me/v1alpha1\nkind: Subnet\nmetadata: {name: tenant-sub}\n\
         spec: {vpc: tenant-a, cidr: 10.72.0.0/24}\n---\n\
         apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: gw-net}\n\
         spec: {vpc: tenant-a, cidr: 10.73.0.0/24, gateway: {}}\n";
    let bed = Bed::start_with_webhook(
        &format!("{LAB_NET}---\n{tenant}---\n{WEB}"),
        &["--enable-probe-rewrite"],
    );
    let on_l2 = r#"juneau.loutres.me/networks: '[{"interface": "eth0", "l2Network": "gw-net"}]'"#;
    let on_tenant =
        r#"juneau.loutres.me/networks: '[{"interface": "eth0", "subnet": "tenant-sub"}]'"#;
    bed.apply(&format!(
        "{}---\n{}---\n{}---\n{}",
        probed_pod("pl2", on_l2),
        probed_pod("pt", on_tenant),
        web_pod(),
        probed_pod_on("pdown", on_l2, 8081),
    ));
    for p in ["pl2", "pt", "web"] {
        bed.wait_ready(p);
    }
    let cp = &bed.cp;
    let probes = |pod: &str| {
        let c = &json(cp, &["get", "pod", pod, "-n", "default"])["spec"]["containers"][0];
        (c["readinessProbe"].clone(), c["livenessProbe"].clone())
    };
    for p in ["pl2", "pt"] {
        let (ready, live) = probes(p);
        for (probe, kind) in [(&ready, "readiness"), (&live, "liveness")] {
            let get = &probe["httpGet"];
            assert_eq!(get["host"], "127.0.0.1", "{p}: {probe}");
            assert_eq!(get["port"], 9465, "{p}: {probe}");
            let path = get["path"].as_str().unwrap_or_default();
            assert!(
                path.starts_with("/juneau/probe/default/") && path.ends_with(&format!("/c/{kind}")),
                "{p}: {probe}"
            );
            assert!(probe.get("tcpSocket").is_none(), "{p}: {probe}");
        }
    }
    // EIP-18: the direct ElasticIP Pod's probes are its own.
    let (ready, live) = probes("web");
    assert_eq!(ready["httpGet"]["port"], 8080, "{ready}");
    assert!(ready["httpGet"].get("host").is_none(), "{ready}");
    assert_eq!(live["tcpSocket"]["port"], 8080, "{live}");
    // Neither probed Pod has a route from the Node: the probes went inside them.
    let routes = std::process::Command::new("ip")
        .args(["-n", node_of(&bed.topo, "node-a").ns.name(), "route"])
        .output()
        .unwrap();
    let routes = String::from_utf8_lossy(&routes.stdout).into_owned();
    for p in ["pl2", "pt"] {
        let address = nic_address(cp, p).expect("an address");
        assert!(!routes.contains(&address), "{p} has a Node route: {routes}");
    }
    // The negative: nothing listens on 8081 in pdown, so the daemon's answer fails it.
    let events = wait_for(
        Duration::from_secs(30),
        || format!("pdown's probes never failed:\n{}", bed.describe()),
        || {
            let e = unhealthy(cp, "pdown");
            e.contains("statuscode: 502").then_some(e)
        },
    );
    eprintln!("pdown: {events}");
    assert!(ready_ips(cp, "pdown").is_none(), "pdown became Ready");
}
