//! Services across a daemon's death: a long TCP connection through a ClusterIP while
//! the client's Node daemon is killed with SIGKILL and started again by its supervisor.
//! The translation lives in the pinned connection table, so not one byte is lost, the
//! connection keeps its backend, and the restarted daemon serves the same Service.
use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    time::{Duration, Instant},
};

mod common;

use juneau::{
    cli::{Filter, node_dir},
    scenario::Layer,
    standalone::{Options, PodDef, Run, Scenario},
};

const STREAM_BYTES: usize = 32 << 20;
const CLUSTER_IP: &str = "10.96.0.50";
const PORT: u16 = 5001;

fn pod(name: &str, node: &str, app: Option<&str>) -> PodDef {
    PodDef {
        name: name.into(),
        namespace: "default".into(),
        node: node.into(),
        annotations: Default::default(),
        labels: app
            .map(|a| ("app".to_owned(), a.to_owned()))
            .into_iter()
            .collect(),
        ports: Default::default(),
        segment: None,
        addresses: Vec::new(),
        bridge_hosts: Vec::new(),
    }
}

/// The Service on Nodes `nodes`; with `tenant`, a Vpc that consumes Services and its
/// Subnet `tenant-web` (SVC-02: its Pods reach default-Vpc backends).
fn scenario(nodes: [&str; 2], tenant: bool) -> Scenario {
    let mut objects = vec![serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "sink"},
        "spec": {
            "clusterIP": CLUSTER_IP,
            "selector": {"app": "sink"},
            "ports": [{"port": PORT, "targetPort": PORT}],
        },
    })];
    if tenant {
        objects.push(serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Vpc",
            "metadata": {"name": "tenant"}, "spec": {"service": {"consume": true}}}));
        objects.push(serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Subnet",
            "metadata": {"name": "tenant-web"},
            "spec": {"vpc": "tenant", "cidr": "10.53.0.0/24"}}));
    }
    Scenario {
        description: "a Service across a daemon restart".into(),
        layer: Layer::Stack,
        proves: vec!["SVC-03".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        objects,
        pods: Vec::new(),
        outside: juneau::scenario::Outside::None,
    }
}

/// The backend of the one Service connection the client's Node holds, once it holds
/// one (a first SYN may meet a port the router has not taken in yet, and is sent
/// again a second later).
fn wait_for_connection(node: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    let filter = Filter {
        addr: Some(CLUSTER_IP.parse().unwrap()),
        ..Default::default()
    };
    loop {
        let rows = juneau::cli::dump_conntrack(&node_dir(node), &filter).unwrap();
        if !rows.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no connection through the ClusterIP"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    backend_of_connection(node)
}

/// The backend of the one Service connection the client's Node holds.
fn backend_of_connection(node: &str) -> String {
    let filter = Filter {
        addr: Some(CLUSTER_IP.parse().unwrap()),
        ..Default::default()
    };
    let rows = juneau::cli::dump_conntrack(&node_dir(node), &filter).unwrap();
    let original: Vec<_> = rows.iter().filter(|r| r.direction == "original").collect();
    assert_eq!(original.len(), 1, "{rows:?}");
    original[0].translated.clone()
}

#[test]
fn svc_03_a_daemon_killed_mid_connection_loses_no_byte_and_the_connection_keeps_its_backend() {
    let peer = killed_mid_stream(["sk-a", "sk-b"], false);
    assert!(peer.starts_with("10.16.0."), "the client itself: {peer}");
}

#[test]
fn svc_02_a_tenant_pods_connection_to_default_vpc_backends_survives_a_daemon_kill_from_its_nodes_source_address()
 {
    let peer = killed_mid_stream(["sv-a", "sv-b"], true);
    assert!(
        peer.starts_with("10.16.255."),
        "the client Node's Service source address (the default Subnet's top), not the tenant's: {peer}"
    );
}

/// A 32 MB stream from a client on `nodes[0]` (on `tenant-web` with `tenant`) through
/// the ClusterIP to one of two backends, one on each Node, while the client Node's
/// daemon is SIGKILLed; returns the peer address the backend saw.
fn killed_mid_stream(nodes: [&str; 2], tenant: bool) -> String {
    let [a, b] = nodes;
    let mut run =
        Run::start(&scenario(nodes, tenant), &Options::default(), &mut |_| {}).expect("start");
    let mut client = pod(&format!("{a}-client"), a, None);
    if tenant {
        client.annotations.insert(
            "juneau.loutres.me/subnet".to_owned(),
            "tenant-web".to_owned(),
        );
    }
    run.add_pod(&client).unwrap();
    let sinks = [format!("{a}-sink"), format!("{b}-sink")];
    run.add_pod(&pod(&sinks[0], a, Some("sink"))).unwrap();
    run.add_pod(&pod(&sinks[1], b, Some("sink"))).unwrap();
    // The frontend with both backends in the Services maps of the client's Node.
    let deadline = Instant::now() + Duration::from_secs(10);
    let frontend = Filter {
        addr: Some(CLUSTER_IP.parse().unwrap()),
        ..Default::default()
    };
    while juneau::cli::dump_services(&node_dir(a), &frontend)
        .ok()
        .and_then(|r| r.first().map(|f| f.backends))
        != Some(2)
    {
        assert!(Instant::now() < deadline, "the backends never reached {a}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A receiver in each backend: whichever Maglev picks checks every byte.
    let data = std::sync::Arc::new(common::stream(STREAM_BYTES));
    let mut receivers = Vec::new();
    let no_more = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sink in &sinks {
        let ns = run.pod(sink).unwrap().ns.path().to_owned();
        let listener =
            juneau::netns::run_in(&ns, || TcpListener::bind(("0.0.0.0", PORT)).unwrap()).unwrap();
        listener.set_nonblocking(true).unwrap();
        let expected = data.clone();
        let no_more = no_more.clone();
        receivers.push(std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            let (mut conn, peer) = loop {
                match listener.accept() {
                    Ok(c) => break c,
                    Err(_)
                        if Instant::now() < deadline
                            && !no_more.load(std::sync::atomic::Ordering::Relaxed) =>
                    {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => return None,
                }
            };
            conn.set_nonblocking(false).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let mut got = Vec::with_capacity(STREAM_BYTES);
            conn.read_to_end(&mut got).unwrap();
            if let Some(at) = got.iter().zip(expected.iter()).position(|(a, b)| a != b) {
                panic!("byte {at} of the stream differs");
            }
            Some((got.len(), peer.ip().to_string()))
        }));
    }
    let client_ns = run.pod(&client.name).unwrap().ns.path().to_owned();
    let dst: SocketAddr = format!("{CLUSTER_IP}:{PORT}").parse().unwrap();
    let sender = std::thread::spawn(move || {
        let mut conn =
            juneau::netns::run_in(&client_ns, || TcpStream::connect(dst).unwrap()).unwrap();
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
    let before = wait_for_connection(a);

    // Into the stream (about three seconds long), then the kill.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!sender.is_finished(), "the stream ended before the kill");
    let old = common::sigkill_daemon(&run, a);
    common::wait_restarted(&run, a, old);
    // The restarted daemon found the connection where the killed one left it.
    assert_eq!(
        backend_of_connection(a),
        before,
        "the same backend after the restart"
    );
    sender.join().unwrap();
    // The backend that was not picked stops waiting for a connection.
    no_more.store(true, std::sync::atomic::Ordering::Relaxed);
    let got: Vec<(usize, String)> = receivers
        .into_iter()
        .filter_map(|r| r.join().unwrap())
        .collect();
    assert_eq!(got.len(), 1, "one backend got the stream: {got:?}");
    assert_eq!(got[0].0, STREAM_BYTES, "the whole stream");
    // The restarted daemon serves the Service: a new connection is translated.
    let ns = run.pod(&client.name).unwrap().ns.path().to_owned();
    let listener_ns: Vec<_> = sinks
        .iter()
        .map(|p| run.pod(p).unwrap().ns.path().to_owned())
        .collect();
    let listeners: Vec<TcpListener> = listener_ns
        .iter()
        .map(|ns| {
            juneau::netns::run_in(ns, || TcpListener::bind(("0.0.0.0", PORT)).unwrap()).unwrap()
        })
        .collect();
    let conn = juneau::netns::run_in(&ns, || {
        TcpStream::connect_timeout(&dst, Duration::from_secs(3))
    })
    .unwrap();
    assert!(conn.is_ok(), "a new connection after the restart: {conn:?}");
    drop(listeners);
    run.teardown(&mut |_| {}).unwrap();
    got[0].1.clone()
}
