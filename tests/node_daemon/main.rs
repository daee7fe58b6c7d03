//! Tier 4: `juneau node` processes run by a standalone cluster, killed and brought
//! back. The datapath must outlive its daemon (pinned links and maps), a returning
//! daemon must adopt what it finds and agree with the cluster again, and an operator
//! must see it all (metrics, `kubectl juneau attachments`).
use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    process::Command,
    time::{Duration, Instant},
};

use juneau::{
    node::metrics::sample,
    scenario::Layer,
    standalone::{Options, PodDef, Run, Scenario},
};

#[path = "../common/mod.rs"]
mod common;

const NETWORKS: &str = "juneau.loutres.me/networks";

fn scenario(nodes: &[&str]) -> Scenario {
    let obj = |kind: &str, name: &str, spec: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        })
    };
    Scenario {
        description: "node daemon restart".into(),
        layer: Layer::Stack,
        proves: vec!["MX-03".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        objects: vec![
            obj("Vpc", "t", serde_json::json!({})),
            obj(
                "L2Network",
                "lab",
                serde_json::json!({"vpc": "t", "cidr": "10.71.0.0/24", "gateway": {}}),
            ),
        ],
        pods: Vec::new(),
        outside: juneau::scenario::Outside::None,
    }
}

fn pod(name: &str, node: &str) -> PodDef {
    PodDef {
        name: name.into(),
        namespace: "default".into(),
        node: node.into(),
        annotations: [(
            NETWORKS.to_owned(),
            r#"[{"interface": "eth0", "l2Network": "lab"}]"#.to_owned(),
        )]
        .into(),
        labels: Default::default(),
        ports: Default::default(),
        segment: None,
        addresses: Vec::new(),
        bridge_hosts: Vec::new(),
    }
}

fn start(nodes: &[&str]) -> Run {
    Run::start(&scenario(nodes), &Options::default(), &mut |_| {}).expect("start the cluster")
}

/// The address the controller gave a Pod's eth0.
fn address(run: &Run, pod: &str) -> String {
    let nics = run.store.interfaces_of("default", pod);
    nics[0].ip().expect("allocated").to_string()
}

/// `ping` that must get every reply: (transmitted, received) from its summary.
fn ping(run: &Run, from: &str, to: &str, args: &[&str]) -> (u64, u64) {
    let mut argv = vec!["ping", "-q", "-W", "2"];
    argv.extend_from_slice(args);
    argv.push(to);
    let out = run.pod(from).unwrap().ns.exec(&argv).unwrap_or_else(|e| e);
    let line = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary: {out}"))
        .to_owned();
    let n = |word: &str| -> u64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        let i = words.iter().position(|w| w.starts_with(word)).unwrap();
        words[i - 1].parse().unwrap()
    };
    (n("packets"), n("received"))
}

/// Scrapes a Node daemon's /metrics from inside its namespace.
fn metrics(run: &Run, node: &str) -> String {
    let ns = run.node_ns(node).unwrap().path().to_owned();
    juneau::netns::run_in(&ns, || {
        let mut s = TcpStream::connect("127.0.0.1:9464").expect("metrics listen");
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        body
    })
    .unwrap()
}

/// `kubectl juneau attachments --node N -o json`.
fn attachments(node: &str) -> Vec<serde_json::Value> {
    serde_json::from_value(common::kubectl_juneau_json(&[
        "attachments",
        "--node",
        node,
    ]))
    .unwrap()
}

/// The kernel id of segment `vni`'s learning table on `node` (which table instance
/// the datapath uses, read from the pinned outer map).
fn fdb_table_id(node: &str, vni: u32) -> u32 {
    use aya::maps::{ArrayOfMaps, HashMap, Map, MapData};
    let dir = juneau::cli::node_dir(node);
    let vnis: HashMap<_, u32, u32> = HashMap::try_from(Map::HashMap(
        MapData::from_pin(dir.join("jn_l2_vni")).unwrap(),
    ))
    .unwrap();
    let slot = vnis.get(&vni, 0).unwrap();
    let outer: ArrayOfMaps<MapData, MapData> = ArrayOfMaps::try_from(Map::ArrayOfMaps(
        MapData::from_pin(dir.join("jn_l2_fdb")).unwrap(),
    ))
    .unwrap();
    outer.get(&slot, 0).unwrap().info().unwrap().id()
}

fn vni(run: &Run) -> u32 {
    run.store.read().0.objects.l2networks[0]
        .status
        .as_ref()
        .unwrap()
        .vni
}

const STREAM_BYTES: usize = 32 << 20;

#[test]
fn l2_28_mx_03_a_daemon_killed_with_sigkill_comes_back_without_losing_a_ping_or_a_byte() {
    let mut run = start(&["rs-a", "rs-b"]);
    run.add_pod(&pod("rs-web", "rs-a")).unwrap();
    run.add_pod(&pod("rs-db", "rs-b")).unwrap();
    run.settle();
    let (web, db) = (address(&run, "rs-web"), address(&run, "rs-db"));
    assert_eq!(ping(&run, "rs-web", &db, &["-c", "3", "-i", "0.2"]), (3, 3));
    let vni = vni(&run);
    let table = fdb_table_id("rs-a", vni);
    let learned_before = juneau::cli::dump_fdb(&juneau::cli::node_dir("rs-a"), vni).unwrap();
    assert!(learned_before.len() >= 2, "{learned_before:?}");

    // A TCP receiver in rs-db checks every byte; a sender in rs-web paces 32 MB over
    // about three seconds, so the stream spans the restart.
    let db_ns = run.pod("rs-db").unwrap().ns.path().to_owned();
    let listener =
        juneau::netns::run_in(&db_ns, || TcpListener::bind("0.0.0.0:5001").unwrap()).unwrap();
    let data = std::sync::Arc::new(common::stream(STREAM_BYTES));
    let expected = data.clone();
    let receiver = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        // A stalled stream fails the test instead of hanging it.
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut got = Vec::with_capacity(STREAM_BYTES);
        conn.read_to_end(&mut got).unwrap();
        if let Some(at) = got.iter().zip(expected.iter()).position(|(a, b)| a != b) {
            panic!("byte {at} of the stream differs");
        }
        got.len()
    });
    let web_ns = run.pod("rs-web").unwrap().ns.path().to_owned();
    let dst: SocketAddr = format!("{db}:5001").parse().unwrap();
    let sender = std::thread::spawn(move || {
        let mut conn = juneau::netns::run_in(&web_ns, || TcpStream::connect(dst).unwrap()).unwrap();
        conn.set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let start = Instant::now();
        // 512 chunks of 64 KiB, one every 6 ms: about three seconds in all.
        for (i, chunk) in data.chunks(1 << 16).enumerate() {
            conn.write_all(chunk).unwrap();
            let due = Duration::from_micros(6_000 * i as u64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    });
    let web_pod_ns = run.pod("rs-web").unwrap().ns.name().to_owned();
    let db_addr = db.clone();
    let flood = std::thread::spawn(move || {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &web_pod_ns,
                "ping",
                "-q",
                "-i",
                "0.002",
                "-c",
                "2000",
                "-w",
                "30",
            ])
            .arg(&db_addr)
            .output()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(800));
    let program_of = |rows: &[serde_json::Value], prog: &str| -> Vec<u64> {
        rows.iter()
            .filter(|r| r["program"] == prog)
            .map(|r| r["program_id"].as_u64().unwrap())
            .collect()
    };
    let before = attachments("rs-a");
    let old = common::sigkill_daemon(&run, "rs-a");
    // The supervisor starts it again; wait until the new one serves.
    let new = common::wait_restarted(&run, "rs-a", old);
    assert_ne!(new, old);
    let events = run.daemons.events.lock().unwrap().join("\n");
    assert!(events.contains(&format!("(pid {old}) exited")), "{events}");

    sender.join().unwrap();
    assert_eq!(
        receiver.join().unwrap(),
        STREAM_BYTES,
        "the stream completes"
    );
    let out = flood.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2000 packets transmitted, 2000 received"),
        "pings lost across the restart: {text}"
    );
    assert_eq!(
        fdb_table_id("rs-a", vni),
        table,
        "the learning table is the same instance, adopted"
    );
    let learned_after = juneau::cli::dump_fdb(&juneau::cli::node_dir("rs-a"), vni).unwrap();
    for e in &learned_before {
        assert!(
            learned_after.iter().any(|a| a.mac == e.mac),
            "{} was forgotten",
            e.mac
        );
    }
    // `bpf dump l2_fdb` names the NIC behind each local port.
    let key = format!("vni={vni}");
    let rows: Vec<serde_json::Value> = serde_json::from_value(common::kubectl_juneau_json(&[
        "bpf",
        "dump",
        "l2_fdb",
        "--node",
        "rs-a",
        "--inner-key",
        &key,
    ]))
    .unwrap();
    let web_mac = run
        .pod("rs-web")
        .unwrap()
        .ns
        .exec(&["cat", "/sys/class/net/eth0/address"])
        .unwrap();
    let row = rows
        .iter()
        .find(|r| r["mac"] == web_mac.trim())
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(row["port"], "default/rs-web.eth0", "{rows:?}");
    // The restarted daemon took the links over: still one program per interface, and
    // each now runs the new daemon's copy (a port's tc filter and the overlay's pinned
    // TCX link both switched in place; an upgrade ships its programs this way).
    let rows = attachments("rs-a");
    for prog in ["port_ingress", "overlay_ingress"] {
        let (was, now) = (program_of(&before, prog), program_of(&rows, prog));
        assert_eq!(was.len(), now.len(), "{prog}: {rows:?}");
        assert!(
            was.iter().all(|id| !now.contains(id)),
            "{prog} still runs the killed daemon's program: {was:?} -> {now:?}"
        );
    }
    let progs: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["program"].as_str().unwrap(), r["owner"].as_str().unwrap()))
        .collect();
    assert_eq!(
        progs.iter().filter(|(p, _)| *p == "port_ingress").count(),
        1,
        "{rows:?}"
    );
    assert!(
        progs.contains(&("port_ingress", "default/rs-web.eth0")),
        "{rows:?}"
    );
    assert!(progs.contains(&("overlay_ingress", "overlay")), "{rows:?}");
    assert!(
        progs.contains(&("underlay_ingress", "underlay")),
        "{rows:?}"
    );
    // The Service device's peer (SVC-02: the Node has a Service source address in the
    // default Subnet, given once it has a Pod NIC).
    assert!(progs.contains(&("svc_host", "service")), "{rows:?}");
    assert_eq!(rows.len(), 4, "nothing attached twice: {rows:?}");
    // And it works as before: a new Pod on the restarted Node reaches the old ones.
    run.add_pod(&pod("rs-new", "rs-a")).unwrap();
    run.settle();
    assert_eq!(ping(&run, "rs-new", &db, &["-c", "2", "-i", "0.2"]), (2, 2));
    assert_eq!(ping(&run, "rs-db", &web, &["-c", "2", "-i", "0.2"]), (2, 2));
    run.teardown(&mut |_| {}).unwrap();
}

#[test]
fn mx_03_cni_while_the_daemon_is_down_fails_clearly_and_pods_changed_meanwhile_are_right_after() {
    let mut run = start(&["dn-a", "dn-b"]);
    for (p, n) in [("dn-p1", "dn-a"), ("dn-p2", "dn-b"), ("dn-gone", "dn-a")] {
        run.add_pod(&pod(p, n)).unwrap();
    }
    run.settle();
    let p2 = address(&run, "dn-p2");
    assert_eq!(ping(&run, "dn-p1", &p2, &["-c", "2", "-i", "0.2"]), (2, 2));
    let m = metrics(&run, "dn-a");
    let adds = r#"juneau_cni_requests_total{command="ADD",result="ok"}"#;
    assert_eq!(sample(&m, adds), Some(2.0), "{m}");
    assert_eq!(sample(&m, "juneau_ports"), Some(2.0), "{m}");
    assert!(
        sample(&m, "juneau_cni_add_duration_seconds_count") == Some(2.0),
        "{m}"
    );

    run.daemons.stop("dn-a");
    // ADD while the daemon is down: the runtime gets a clear error and retries later.
    let err = run
        .add_pod(&pod("dn-late", "dn-a"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot reach the node daemon"), "{err}");
    assert!(err.contains("\"code\":11"), "try again later: {err}");
    // DEL while it is down fails too; the sandbox goes anyway (its veth with it).
    let del = run.delete_pod("dn-gone").unwrap_err().to_string();
    assert!(del.contains("cannot reach the node daemon"), "{del}");

    run.daemons.start("dn-a", Duration::from_secs(20)).unwrap();
    run.retry_add("dn-late").unwrap();
    run.settle();
    let late = address(&run, "dn-late");
    assert_eq!(
        ping(&run, "dn-late", &p2, &["-c", "2", "-i", "0.2"]),
        (2, 2)
    );
    assert_eq!(
        ping(&run, "dn-p2", &late, &["-c", "2", "-i", "0.2"]),
        (2, 2)
    );
    assert_eq!(
        ping(&run, "dn-p1", &late, &["-c", "2", "-i", "0.2"]),
        (2, 2)
    );

    // No stale port, no missing one: the datapath serves exactly the live NICs, the
    // kernel shows exactly their programs, the cluster holds exactly their endpoints.
    let m = metrics(&run, "dn-a");
    assert_eq!(sample(&m, "juneau_ports"), Some(2.0), "{m}");
    let mut owners: Vec<String> = attachments("dn-a")
        .iter()
        .filter(|r| r["program"] == "port_ingress")
        .map(|r| r["owner"].as_str().unwrap().to_owned())
        .collect();
    owners.sort();
    assert_eq!(owners, ["default/dn-late.eth0", "default/dn-p1.eth0"]);
    let mut eps: Vec<String> = run
        .store
        .read()
        .0
        .endpoints
        .iter()
        .filter(|e| e.spec.node_name == "dn-a")
        .map(|e| e.metadata.name.clone().unwrap())
        .collect();
    eps.sort();
    assert_eq!(eps, ["dn-late.eth0", "dn-p1.eth0"]);

    // Metrics move: one ADD since the restart, and a hairpin frame (to the sender's own
    // MAC, learned on its own port) is counted as a drop.
    assert_eq!(sample(&m, adds), Some(1.0), "{m}");
    let hairpin = r#"juneau_drops_total{reason="HAIRPIN"}"#;
    let before = sample(&m, hairpin).unwrap();
    let own_mac = run
        .pod("dn-p1")
        .unwrap()
        .ns
        .exec(&["cat", "/sys/class/net/eth0/address"])
        .unwrap();
    run.pod("dn-p1")
        .unwrap()
        .ns
        .exec(&[
            "arping",
            "-q",
            "-c",
            "3",
            "-W",
            "0.1",
            "-w",
            "2",
            "-t",
            own_mac.trim(),
            "-I",
            "eth0",
            &p2,
        ])
        .ok();
    let after = sample(&metrics(&run, "dn-a"), hairpin).unwrap();
    assert!(after >= before + 3.0, "hairpin drops {before} -> {after}");
    assert!(
        sample(&m, &format!("juneau_fdb_entries{{vni=\"{}\"}}", vni(&run))).unwrap() >= 2.0,
        "{m}"
    );
    run.teardown(&mut |_| {}).unwrap();
}

mod attachments;
