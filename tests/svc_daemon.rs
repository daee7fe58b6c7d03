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

fn scenario() -> Scenario {
    Scenario {
        description: "a Service across a daemon restart".into(),
        layer: Layer::Stack,
        proves: vec!["SVC-03".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: vec!["sk-a".into(), "sk-b".into()],
        objects: vec![serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "sink"},
            "spec": {
                "clusterIP": CLUSTER_IP,
                "selector": {"app": "sink"},
                "ports": [{"port": PORT, "targetPort": PORT}],
            },
        })],
        pods: Vec::new(),
        outside: false,
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
    let mut run = Run::start(&scenario(), &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&pod("sk-client", "sk-a", None)).unwrap();
    run.add_pod(&pod("sk-sink-a", "sk-a", Some("sink")))
        .unwrap();
    run.add_pod(&pod("sk-sink-b", "sk-b", Some("sink")))
        .unwrap();
    // The frontend with both backends in the Services maps of the client's Node.
    let deadline = Instant::now() + Duration::from_secs(10);
    let frontend = Filter {
        addr: Some(CLUSTER_IP.parse().unwrap()),
        ..Default::default()
    };
    while juneau::cli::dump_services(&node_dir("sk-a"), &frontend)
        .ok()
        .and_then(|r| r.first().map(|f| f.backends))
        != Some(2)
    {
        assert!(Instant::now() < deadline, "the backends never reached sk-a");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A receiver in each backend: whichever Maglev picks checks every byte.
    let data = std::sync::Arc::new(common::stream(STREAM_BYTES));
    let mut receivers = Vec::new();
    let no_more = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sink in ["sk-sink-a", "sk-sink-b"] {
        let ns = run.pod(sink).unwrap().ns.path().to_owned();
        let listener =
            juneau::netns::run_in(&ns, || TcpListener::bind(("0.0.0.0", PORT)).unwrap()).unwrap();
        listener.set_nonblocking(true).unwrap();
        let expected = data.clone();
        let no_more = no_more.clone();
        receivers.push(std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut conn = loop {
                match listener.accept() {
                    Ok((c, _)) => break c,
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
            Some(got.len())
        }));
    }
    let client_ns = run.pod("sk-client").unwrap().ns.path().to_owned();
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
    let before = wait_for_connection("sk-a");

    // Into the stream (about three seconds long), then the kill.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!sender.is_finished(), "the stream ended before the kill");
    let old = common::sigkill_daemon(&run, "sk-a");
    common::wait_restarted(&run, "sk-a", old);
    // The restarted daemon found the connection where the killed one left it.
    assert_eq!(
        backend_of_connection("sk-a"),
        before,
        "the same backend after the restart"
    );
    sender.join().unwrap();
    // The backend that was not picked stops waiting for a connection.
    no_more.store(true, std::sync::atomic::Ordering::Relaxed);
    let got: Vec<usize> = receivers
        .into_iter()
        .filter_map(|r| r.join().unwrap())
        .collect();
    assert_eq!(got, [STREAM_BYTES], "one backend got the whole stream");
    // The restarted daemon serves the Service: a new connection is translated.
    let ns = run.pod("sk-client").unwrap().ns.path().to_owned();
    let listener_ns: Vec<_> = ["sk-sink-a", "sk-sink-b"]
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
}
