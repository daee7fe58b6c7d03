//! The CNI plugin binary against a node daemon serving a Node namespace: the spec's
//! commands, results and error codes; ADD that fails midway leaves nothing; DEL is
//! idempotent (MX-01: Multus can delegate to Juneau).
use std::{
    io::Write,
    path::PathBuf,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
};

use juneau::{
    controller::{self, Config},
    netns::{self, Owned},
    node::{Dataplane, agent::Agent, netlink, server, veth},
    store::{Object, PodRecord, Store},
};

static NEXT: AtomicU32 = AtomicU32::new(0);

struct Bed {
    store: Store,
    socket: PathBuf,
    _agent: Arc<Agent>,
    node: Owned,
}

fn uniq(role: &str) -> String {
    format!(
        "jn-cni-{role}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn yaml(s: &str) -> Object {
    Object::from_value(serde_yaml_ng::from_str(s).unwrap()).unwrap()
}

fn bed(pods: &[(&str, &str)]) -> Bed {
    let store = Store::new();
    store
        .create(yaml(
            "kind: Vpc\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: t}\nspec: {}",
        ))
        .unwrap();
    store
        .create(yaml("kind: L2Network\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: routed}\nspec: {vpc: t, cidr: 10.61.0.0/24, gateway: {}}"))
        .unwrap();
    store
        .create(yaml("kind: L2Network\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: pure}\nspec: {vpc: t, mtu: 1400}"))
        .unwrap();
    for (name, networks) in pods {
        store
            .create_pod(PodRecord {
                namespace: "team".into(),
                name: (*name).into(),
                node: "n1".into(),
                annotations: [(
                    "juneau.loutres.me/networks".to_owned(),
                    (*networks).to_owned(),
                )]
                .into(),
                ..Default::default()
            })
            .unwrap();
    }
    while controller::run_once(&store, &Config::default()).unwrap() {}
    let node = Owned::create(&uniq("node")).unwrap();
    let socket = std::env::temp_dir().join(format!("{}.sock", node.name()));
    let agent = netns::run_in(node.path(), || {
        let dp = Dataplane::load(None).unwrap();
        let agent = Arc::new(
            Agent::new(
                "n1",
                "10.99.9.1".parse().unwrap(),
                Arc::new(store.clone()),
                dp,
            )
            .unwrap(),
        );
        server::listen(agent.clone(), &socket).unwrap();
        agent
    })
    .unwrap();
    Bed {
        store,
        socket,
        _agent: agent,
        node,
    }
}

/// Runs the plugin; (success, stdout as JSON).
fn cni(
    socket: &std::path::Path,
    env: &[(&str, &str)],
    conf: serde_json::Value,
) -> (bool, serde_json::Value) {
    let mut cmd = Command::new(juneau::standalone::sibling_binary("juneau-cni"));
    cmd.env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut conf = conf;
    conf["socket"] = serde_json::json!(socket);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // VERSION answers without reading stdin: a closed pipe here is fine.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(conf.to_string().as_bytes());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v = if text.trim().is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    };
    (out.status.success(), v)
}

fn conf() -> serde_json::Value {
    serde_json::json!({"cniVersion": "1.1.0", "name": "juneau", "type": "juneau-cni"})
}

fn pod_env<'a>(cmd: &'a str, cid: &'a str, netns: &'a str, pod: &'a str) -> Vec<(&'a str, String)> {
    vec![
        ("CNI_COMMAND", cmd.to_owned()),
        ("CNI_CONTAINERID", cid.to_owned()),
        ("CNI_NETNS", netns.to_owned()),
        ("CNI_IFNAME", "eth0".to_owned()),
        (
            "CNI_ARGS",
            format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=team;K8S_POD_NAME={pod}"),
        ),
    ]
}

fn run(bed: &Bed, cmd: &str, cid: &str, pod_ns: &Owned, pod: &str) -> (bool, serde_json::Value) {
    let env = pod_env(cmd, cid, pod_ns.path().to_str().unwrap(), pod);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    cni(&bed.socket, &env, conf())
}

fn owned_links(bed: &Bed) -> Vec<String> {
    netns::run_in(bed.node.path(), || {
        netlink::links_with_alias("juneau:port").unwrap()
    })
    .unwrap()
    .into_iter()
    .map(|(n, _, _)| n)
    .collect()
}

#[test]
fn mx_01_version_and_error_codes_follow_the_spec() {
    let (ok, v) = cni(
        std::path::Path::new("/nonexistent"),
        &[("CNI_COMMAND", "VERSION")],
        conf(),
    );
    assert!(ok);
    assert_eq!(
        v["supportedVersions"],
        serde_json::json!(["0.4.0", "1.0.0", "1.1.0"])
    );
    let (ok, v) = cni(
        std::path::Path::new("/nonexistent"),
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_NETNS", "/x"),
            ("CNI_IFNAME", "eth0"),
        ],
        conf(),
    );
    assert!(!ok);
    assert_eq!(v["code"], 4, "missing CNI_CONTAINERID: {v}");
    assert_eq!(v["msg"], "CNI_CONTAINERID is not set");
    let mut old = conf();
    old["cniVersion"] = serde_json::json!("0.3.1");
    let (_, v) = cni(
        std::path::Path::new("/nonexistent"),
        &[("CNI_COMMAND", "ADD")],
        old,
    );
    assert_eq!(v["code"], 1, "{v}");
    let env = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c"),
        ("CNI_NETNS", "/x"),
        ("CNI_IFNAME", "eth0"),
    ];
    let (_, v) = cni(
        std::path::Path::new("/nonexistent/juneau.sock"),
        &env,
        conf(),
    );
    assert_eq!(
        v["code"], 11,
        "an unreachable daemon is 'try again later': {v}"
    );
    assert!(
        v["details"]
            .as_str()
            .unwrap()
            .contains("is the juneau daemon running"),
        "{v}"
    );
}

#[test]
fn l2_01_l2_15_l2_21_l2_25_mx_01_add_check_del_and_del_again() {
    let bed = bed(&[(
        "app",
        r#"[{"interface":"eth0","l2Network":"routed"},{"interface":"eth1","l2Network":"pure"}]"#,
    )]);
    let pod = Owned::create(&uniq("pod")).unwrap();
    // As a runtime makes it: IPv6 on by default (the harness turns it off in its own
    // namespaces).
    for key in ["all", "default"] {
        pod.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{key}.disable_ipv6=0"),
        ])
        .unwrap();
    }
    let v6_off = |pod: &Owned, key: &str| {
        pod.exec(&["sysctl", "-n", &format!("net.ipv6.conf.{key}.disable_ipv6")])
            .unwrap()
            .trim()
            .to_owned()
    };
    let cid = "4b1d0c0ffee0123456789abcdef";
    let (ok, res) = run(&bed, "ADD", cid, &pod, "app");
    assert!(ok, "ADD failed: {res}");
    for nic in ["eth0", "eth1"] {
        assert_eq!(v6_off(&pod, nic), "1", "{nic} is made without IPv6");
    }
    assert_eq!(
        v6_off(&pod, "default"),
        "0",
        "the Pod's own default is left as it was"
    );
    assert_eq!(res["cniVersion"], "1.1.0");
    assert_eq!(
        res["ips"],
        serde_json::json!([{"address": "10.61.0.2/24", "gateway": "10.61.0.1", "interface": 1}])
    );
    assert_eq!(
        res["routes"],
        serde_json::json!([{"dst": "0.0.0.0/0", "gw": "10.61.0.1"}])
    );
    // L2-15: one default route, eth0's; L2-25: no address on the cidr-less eth1.
    let routes = pod.exec(&["ip", "-4", "route", "show", "default"]).unwrap();
    assert_eq!(routes.lines().count(), 1, "{routes}");
    assert!(routes.contains("via 10.61.0.1 dev eth0"), "{routes}");
    assert!(
        !pod.exec(&["ip", "-4", "addr", "show", "dev", "eth1"])
            .unwrap()
            .contains("inet ")
    );
    // L2-21: the segment MTU on both ends of eth1's veth.
    assert!(
        pod.exec(&["ip", "link", "show", "dev", "eth1"])
            .unwrap()
            .contains("mtu 1400")
    );
    let host1 = veth::host_name(cid, "eth1");
    assert!(
        bed.node
            .exec(&["ip", "link", "show", "dev", &host1])
            .unwrap()
            .contains("mtu 1400")
    );
    // L2-01: a NIC adds nothing of its own to the segment: neither end has an IPv6
    // address (so no DAD, router solicitation or MLD report leaves it).
    let host0 = veth::host_name(cid, "eth0");
    for (what, out) in [
        (
            "pod eth0",
            pod.exec(&["ip", "-d", "-6", "addr", "show", "dev", "eth0"]),
        ),
        (
            "pod eth1",
            pod.exec(&["ip", "-d", "-6", "addr", "show", "dev", "eth1"]),
        ),
        (
            "host eth0",
            bed.node
                .exec(&["ip", "-d", "-6", "addr", "show", "dev", &host0]),
        ),
        (
            "host eth1",
            bed.node
                .exec(&["ip", "-d", "-6", "addr", "show", "dev", &host1]),
        ),
    ] {
        let out = out.unwrap();
        assert!(!out.contains("inet6"), "{what}: {out}");
    }
    // The host end by address generation mode, the Pod end by the sysctl the Pod can
    // turn back.
    let host = bed
        .node
        .exec(&["ip", "-d", "link", "show", "dev", &host0])
        .unwrap();
    assert!(host.contains("addrgenmode none"), "{host}");
    let pod_v6 = pod
        .exec(&["sysctl", "-n", "net.ipv6.conf.eth0.disable_ipv6"])
        .unwrap();
    assert_eq!(pod_v6.trim(), "1");
    assert_eq!(
        bed.store.read().0.endpoints.len(),
        2,
        "one NetworkEndpoint per NIC"
    );
    let (ok, v) = run(&bed, "CHECK", cid, &pod, "app");
    assert!(ok, "CHECK failed after ADD: {v}");
    let (ok, v) = run(&bed, "DEL", cid, &pod, "app");
    assert!(ok, "DEL failed: {v}");
    assert!(
        owned_links(&bed).is_empty(),
        "DEL left {:?}",
        owned_links(&bed)
    );
    assert!(bed.store.read().0.endpoints.is_empty());
    let (ok, v) = run(&bed, "DEL", cid, &pod, "app");
    assert!(ok, "a second DEL must succeed: {v}");
    let (ok, v) = run(&bed, "CHECK", cid, &pod, "app");
    assert!(!ok);
    assert_eq!(v["code"], 3, "CHECK after DEL: {v}");
}

#[test]
fn mx_01_an_add_that_fails_midway_is_rolled_back() {
    let bed = bed(&[(
        "app",
        r#"[{"interface":"eth0","l2Network":"routed"},{"interface":"eth1","l2Network":"pure"}]"#,
    )]);
    let pod = Owned::create(&uniq("pod")).unwrap();
    let cid = "feedbeef00112233";
    // Something else already uses the name eth1's host veth needs.
    let taken = veth::host_name(cid, "eth1");
    bed.node
        .exec(&[
            "ip", "link", "add", &taken, "type", "veth", "peer", "name", "squatter",
        ])
        .unwrap();
    let (ok, v) = run(&bed, "ADD", cid, &pod, "app");
    assert!(!ok);
    assert_eq!(v["code"], 5, "{v}");
    assert!(v["msg"].as_str().unwrap().contains("eth1"), "{v}");
    assert!(
        owned_links(&bed).is_empty(),
        "eth0's veth survived the failed ADD: {:?}",
        owned_links(&bed)
    );
    assert!(
        bed.store.read().0.endpoints.is_empty(),
        "an endpoint survived the failed ADD"
    );
    let left = pod.exec(&["ip", "link", "show", "dev", "eth0"]);
    assert!(
        left.as_ref().is_err_and(|e| e.contains("does not exist")),
        "eth0 left in the Pod: {left:?}"
    );
    // The name was never Juneau's: the squatter is untouched.
    assert!(
        bed.node
            .exec(&["ip", "link", "show", "dev", &taken])
            .is_ok()
    );
}

#[test]
fn mx_01_gc_removes_attachments_not_in_the_valid_list() {
    let bed = bed(&[
        ("keep", r#"[{"interface":"eth0","l2Network":"routed"}]"#),
        ("stale", r#"[{"interface":"eth0","l2Network":"routed"}]"#),
    ]);
    let (p1, p2) = (
        Owned::create(&uniq("pod")).unwrap(),
        Owned::create(&uniq("pod")).unwrap(),
    );
    assert!(run(&bed, "ADD", "keep0001", &p1, "keep").0);
    assert!(run(&bed, "ADD", "stale001", &p2, "stale").0);
    assert_eq!(owned_links(&bed).len(), 2);
    let mut gc = conf();
    gc["cni.dev/valid-attachments"] =
        serde_json::json!([{"containerID": "keep0001", "ifname": "eth0"}]);
    let (ok, v) = cni(&bed.socket, &[("CNI_COMMAND", "GC")], gc);
    assert!(ok, "GC failed: {v}");
    assert_eq!(owned_links(&bed), vec![veth::host_name("keep0001", "eth0")]);
    let (ok, _) = cni(&bed.socket, &[("CNI_COMMAND", "STATUS")], conf());
    assert!(ok, "STATUS of a running daemon");
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

mod edges;
