//! A NATGateway across a daemon's death (NAT-01): a 32 MB TCP stream from a Pod to an
//! outside server, translated to its Node's address, while that Node's daemon is killed
//! with SIGKILL and started again by its supervisor. The mapping is an entry of the
//! pinned connection table (and its claim), so not one byte is lost, the connection
//! keeps its address and port, and the restarted daemon translates new connections.
use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    time::{Duration, Instant},
};

mod common;

use juneau::{
    cli::{Filter, node_dir},
    scenario::{Layer, steps::Bed},
    standalone::{Options, PodDef, Run, Scenario},
};

const STREAM_BYTES: usize = 32 << 20;
const SERVER: &str = "198.51.100.10";
const PORT: u16 = 5002;
const NODE: &str = "nk-a";

/// The NATGateway scene on Nodes `a` (the client's) and `b`.
fn scenario(a: &str, b: &str) -> Scenario {
    let obj = |v: serde_json::Value| v;
    Scenario {
        description: "a NATGateway across a daemon restart".into(),
        layer: Layer::Stack,
        proves: vec!["NAT-01".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: vec![a.into(), b.into()],
        objects: vec![
            obj(
                serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "AddressPool",
                "metadata": {"name": "lan"},
                "spec": {"advertiseMode": "arp", "addresses": ["10.99.0.100-10.99.0.120"]}}),
            ),
            obj(
                serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "ExternalNetwork",
                "metadata": {"name": "ext"}, "spec": {"type": "arp", "addressPools": ["lan"]}}),
            ),
            obj(
                serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Vpc",
                "metadata": {"name": "tenant"}, "spec": {}}),
            ),
            obj(
                serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NATGateway",
                "metadata": {"name": "out"}, "spec": {"vpc": "tenant", "externalNetwork": "ext"}}),
            ),
            obj(
                serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "RouteTable",
                "metadata": {"name": "tenant"}, "spec": {"vpc": "tenant", "routes": [
                    {"dst": "0.0.0.0/0", "via": {"type": "natGateway", "natGateway": "out"}}]}}),
            ),
            obj(
                serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Subnet",
                "metadata": {"name": "web"}, "spec": {"vpc": "tenant", "cidr": "10.52.0.0/24"}}),
            ),
        ],
        pods: Vec::new(),
        outside: juneau::scenario::Outside::Router,
    }
}

/// The namespace of `node`'s client Pod (`client_pod`).
fn client_netns(run: &Run, node: &str) -> PathBuf {
    run.pod(&format!("{node}-client"))
        .expect("the client Pod")
        .ns
        .path()
        .to_owned()
}

fn client_pod(node: &str) -> PodDef {
    common::pod_def(
        &format!("{node}-client"),
        node,
        &[("juneau.loutres.me/subnet", "web")],
    )
}

/// The program ids that run on the client's veth on `NODE`, by program name: a Subnet
/// NIC's veth runs the router (`gw_route`) itself, with no `port_ingress` before it.
fn client_programs() -> Vec<(String, u64)> {
    let rows: Vec<serde_json::Value> = serde_json::from_value(common::kubectl_juneau_json(&[
        "attachments",
        "--node",
        NODE,
    ]))
    .unwrap();
    rows.iter()
        .filter(|r| r["owner"] == format!("default/{NODE}-client.eth0"))
        .map(|r| {
            (
                r["program"].as_str().unwrap().to_owned(),
                r["program_id"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The translated source of the one NAT connection to the server `NODE` holds.
fn mapping() -> Option<String> {
    let filter = Filter {
        addr: Some(SERVER.parse().unwrap()),
        ..Default::default()
    };
    let d = juneau::features::nat::cli::dump_nat(&node_dir(NODE), &filter).ok()?;
    let tcp: Vec<_> = d
        .mappings
        .iter()
        .filter(|m| m.protocol == "tcp" && m.server.ends_with(&format!(":{PORT}")))
        .collect();
    assert!(tcp.len() <= 1, "{tcp:?}");
    tcp.first().map(|m| m.translated.clone())
}

#[test]
fn nat_01_a_daemon_killed_mid_stream_loses_no_byte_and_the_connection_keeps_its_mapping() {
    let mut run =
        Run::start(&scenario(NODE, "nk-b"), &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&client_pod(NODE)).unwrap();
    let server_ns = PathBuf::from("/run/netns").join(run.netns_name("client").unwrap());
    let listener =
        juneau::netns::run_in(&server_ns, || TcpListener::bind((SERVER, PORT)).unwrap()).unwrap();
    let data = std::sync::Arc::new(common::stream(STREAM_BYTES));
    let receiver = common::streams::receive(listener, data.clone(), None);
    let client_ns = client_netns(&run, NODE);
    let client_again = client_ns.clone();
    let dst: SocketAddr = format!("{SERVER}:{PORT}").parse().unwrap();
    // 512 chunks of 64 KiB, one every 6 ms, stopping halfway until the daemon was
    // killed and started again: the kill falls inside the stream.
    let (go_on, hold) = std::sync::mpsc::channel();
    let sender =
        common::streams::send_held(client_ns, dst, data, Duration::from_millis(6), Some(hold));
    let deadline = Instant::now() + Duration::from_secs(12);
    let before = loop {
        if let Some(m) = mapping() {
            break m;
        }
        assert!(Instant::now() < deadline, "no NAT mapping on {NODE}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(before.starts_with("10.99.0.100:"), "{before}");

    let programs = client_programs();
    assert!(
        programs.len() == 1 && programs[0].0 == "gw_route",
        "{programs:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let old = common::sigkill_daemon(&run, NODE);
    common::wait_restarted(&run, NODE, old);
    go_on.send(()).unwrap();
    // The new daemon switched the port's filter to its own router program, in place.
    let after = client_programs();
    assert!(
        after.len() == 1 && after[0].0 == "gw_route" && after[0].1 != programs[0].1,
        "{programs:?} -> {after:?}"
    );
    assert_eq!(
        mapping().as_deref(),
        Some(before.as_str()),
        "the same address and port after the restart"
    );
    sender.join().unwrap();
    let (got, peer) = receiver.join().unwrap();
    assert_eq!(got, STREAM_BYTES, "the whole stream arrived");
    assert_eq!(
        peer.to_string(),
        before,
        "the server saw the Node's address and port"
    );
    // The restarted daemon translates a new connection.
    let listener = juneau::netns::run_in(&server_ns, || {
        TcpListener::bind((SERVER, PORT + 1)).unwrap()
    })
    .unwrap();
    let ns = client_again;
    let again: SocketAddr = format!("{SERVER}:{}", PORT + 1).parse().unwrap();
    let conn = juneau::netns::run_in(&ns, || {
        TcpStream::connect_timeout(&again, Duration::from_secs(3))
    })
    .unwrap();
    assert!(conn.is_ok(), "a new connection after the restart: {conn:?}");
    let (_, peer) = listener.accept().unwrap();
    assert_eq!(peer.ip().to_string(), "10.99.0.100");
    run.teardown(&mut |_| {}).unwrap();
}

/// Holds every source port of `nat_ip` toward `server:port` (UDP), as 64,512 live
/// connections would: their claims written into the Node's pinned connection table.
fn hold_every_port(node: &str, nat_ip: &str, server: &str, port: u16) {
    use juneau_common::ct::{CT_F_NAT, CT_F_REPLY, CtEntry, CtKey, PROTO_UDP, ZONE_HOST};
    let path = node_dir(node).join(juneau_common::map_names::CT);
    let data = aya::maps::MapData::from_pin(&path).expect("the pinned connection table");
    let mut ct: aya::maps::HashMap<_, CtKey, CtEntry> =
        aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
    let be = |a: &str| u32::from_ne_bytes(a.parse::<std::net::Ipv4Addr>().unwrap().octets());
    let claim = CtEntry {
        flags: CT_F_REPLY | CT_F_NAT,
        last_seen_ns: juneau::node::dataplane::monotonic_coarse_ns(),
        ..Default::default()
    };
    for p in 1024u16..=65535 {
        let key = CtKey::new(
            ZONE_HOST,
            be(server),
            be(nat_ip),
            port.to_be(),
            p.to_be(),
            PROTO_UDP,
        );
        ct.insert(key, claim, 0).expect("a claim");
    }
}

#[test]
fn nat_02_a_node_out_of_ports_refuses_at_once_counts_it_and_says_so_on_its_attachment() {
    const UDP_PORT: u16 = 5003;
    // Nodes of its own: the tests of this file run at once.
    const NODE: &str = "nx-a";
    let mut run =
        Run::start(&scenario(NODE, "nx-b"), &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&client_pod(NODE)).unwrap();
    let attachment = format!("ext--{NODE}");
    let status = |run: &Run| {
        run.store
            .read()
            .0
            .objects
            .external_network_attachment(&attachment)
            .and_then(|a| a.status.clone())
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while status(&run).assigned_ip != "10.99.0.100".parse().ok() {
        assert!(Instant::now() < deadline, "no address: {:?}", status(&run));
        std::thread::sleep(Duration::from_millis(100));
    }
    hold_every_port(NODE, "10.99.0.100", SERVER, UDP_PORT);
    // The receiver: nothing may reach it.
    let server_ns = PathBuf::from("/run/netns").join(run.netns_name("client").unwrap());
    let server = juneau::netns::run_in(&server_ns, || {
        let s = std::net::UdpSocket::bind((SERVER, UDP_PORT)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        s
    })
    .unwrap();
    let client_ns = client_netns(&run, NODE);
    let answer = juneau::netns::run_in(&client_ns, || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        s.connect((SERVER, UDP_PORT)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        // The first datagram may meet a router that has not taken the route in yet.
        let start = Instant::now();
        let mut last = None;
        while start.elapsed() < Duration::from_secs(10) {
            s.send(b"port?").unwrap();
            let mut buf = [0u8; 16];
            match s.recv(&mut buf) {
                Err(e)
                    if e.kind() != std::io::ErrorKind::WouldBlock
                        && e.kind() != std::io::ErrorKind::TimedOut =>
                {
                    return e.kind();
                }
                other => last = Some(format!("{other:?}")),
            }
        }
        panic!("no refusal: {last:?}");
    })
    .unwrap();
    // An error the ICMP refusal raised on the socket: a time-out would have been
    // WouldBlock or TimedOut, which the loop above does not take.
    assert!(
        matches!(
            answer,
            std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::NetworkUnreachable
        ),
        "refused by an ICMP error, not a time-out: {answer:?}"
    );
    let mut buf = [0u8; 16];
    assert!(
        server.recv_from(&mut buf).is_err(),
        "nothing reached the server"
    );
    let drops = juneau::cli::dump_drops(&node_dir(NODE)).unwrap();
    let counted = drops
        .iter()
        .find(|(r, _)| r == "NAT_PORT_EXHAUSTED")
        .map_or(0, |(_, n)| *n);
    assert!(counted >= 1, "counted under its reason: {drops:?}");
    // The condition, within a few of the daemon's rounds.
    let deadline = Instant::now() + Duration::from_secs(20);
    let shown = loop {
        let st = status(&run);
        if let Some(c) = st
            .conditions
            .iter()
            .find(|c| c.type_ == juneau::api::PORTS_EXHAUSTED)
        {
            break c.clone();
        }
        assert!(Instant::now() < deadline, "no PortsExhausted: {st:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (shown.status.as_str(), shown.reason.as_str()),
        ("True", "NoFreePort"),
        "{shown:?}"
    );
    assert!(shown.message.contains("10.99.0.100"), "{}", shown.message);
    assert!(
        status(&run)
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "Ready kept beside it"
    );
    run.teardown(&mut |_| {}).unwrap();
}
