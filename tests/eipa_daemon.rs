//! An ElasticIPAttachment across daemons' deaths (NAT-03): a 32 MB TCP stream from the
//! outside client to the ElasticIP, mapped 1:1 onto a Subnet Pod, while the daemon of
//! the Node the upstream router sends it to (not the Pod's: the packets are carried to
//! the Pod's Node over the overlay) and then the Pod's Node's daemon are killed with
//! SIGKILL and started again by their supervisor. The mapping is the pinned ElasticIP
//! entry and port, and the connection's policy state the pinned connection table: not
//! one byte is lost, and the Pod sees the client's own address. The same stream
//! through a layout change, and the end of a deleted attachment's mapping.
use std::{
    net::{SocketAddr, TcpListener},
    path::PathBuf,
    thread::JoinHandle,
    time::Duration,
};

mod common;

use juneau::{
    scenario::{Layer, steps::Bed},
    standalone::{Options, PodDef, Run, Scenario},
};

const STREAM_BYTES: usize = 32 << 20;
const CLIENT: &str = "198.51.100.10";
const EIP: &str = "10.99.0.110";
const PORT: u16 = 5012;
/// The Pod's Node, and the one the upstream router sends the ElasticIP's packets to
/// (each test has its own pair: the tests of this file run at once, and a Node's name
/// is its daemon's socket and pin folder).
const NODE: &str = "ek-a";
const CARRIER: &str = "ek-b";

fn scenario(nodes: [&str; 2]) -> Scenario {
    let objects = [
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "AddressPool",
            "metadata": {"name": "lan"},
            "spec": {"advertiseMode": "arp", "addresses": ["10.99.0.100-10.99.0.120"]}}),
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "ExternalNetwork",
            "metadata": {"name": "ext"}, "spec": {"type": "arp", "addressPools": ["lan"]}}),
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Vpc",
            "metadata": {"name": "tenant"}, "spec": {}}),
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "RouteTable",
            "metadata": {"name": "tenant"}, "spec": {"vpc": "tenant", "routes": [
                {"dst": "0.0.0.0/0", "via": {"type": "internetGateway"}}]}}),
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Subnet",
            "metadata": {"name": "web"}, "spec": {"vpc": "tenant", "cidr": "10.53.0.0/24"}}),
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "ElasticIP",
            "metadata": {"name": "web-eip", "namespace": "default"},
            "spec": {"externalNetwork": "ext", "requestedIP": EIP}}),
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "ElasticIPAttachment",
            "metadata": {"name": "web-eipa", "namespace": "default"},
            "spec": {"elasticIPRef": {"name": "web-eip"},
                     "targetRef": {"networkInterfaceName": "web.eth0"}}}),
    ];
    Scenario {
        description: "an ElasticIPAttachment across daemon restarts".into(),
        layer: Layer::Stack,
        proves: vec!["NAT-03".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: nodes.map(String::from).to_vec(),
        objects: objects.into(),
        pods: Vec::new(),
        outside: juneau::scenario::Outside::Router,
    }
}

fn web(node: &str) -> PodDef {
    common::pod_def("web", node, &[("juneau.loutres.me/subnet", "web")])
}

fn ns(run: &Run, host: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(run.netns_name(host).unwrap())
}

/// The upstream router sends the ElasticIP's packets to Node `n` (by its index),
/// whatever ARP says.
fn pin_upstream(run: &Run, n: usize) {
    let upstream = run.netns_name("upstream").unwrap();
    let pinned = std::process::Command::new("ip")
        .args(["-n", &upstream, "neigh", "replace", EIP, "lladdr"])
        .arg(juneau::standalone::topology::node_mac(n))
        .args(["dev", "ul0", "nud", "permanent"])
        .status()
        .unwrap();
    assert!(pinned.success());
}

/// The client's 32 MB stream to the ElasticIP, in 512 chunks of 64 KiB one every
/// `every` (stopping halfway until `hold` says go on, when given), to the Pod's
/// listener; returns once the connection reached the Pod (the
/// attachment is written once the Pod's endpoint is: the sender connects until it
/// is). Returns the sender and the receiver.
fn start_stream(
    run: &Run,
    every: Duration,
    hold: Option<std::sync::mpsc::Receiver<()>>,
) -> (JoinHandle<()>, JoinHandle<(usize, SocketAddr)>) {
    let pod_ns = run.pod("web").expect("the Pod").ns.path().to_owned();
    let listener =
        juneau::netns::run_in(&pod_ns, || TcpListener::bind(("0.0.0.0", PORT)).unwrap()).unwrap();
    let data = std::sync::Arc::new(common::stream(STREAM_BYTES));
    let (accepted, connected) = std::sync::mpsc::channel();
    let receiver = common::streams::receive(listener, data.clone(), Some(accepted));
    let dst: SocketAddr = format!("{EIP}:{PORT}").parse().unwrap();
    let sender = common::streams::send_held(ns(run, "client"), dst, data, every, hold);
    connected
        .recv_timeout(Duration::from_secs(20))
        .expect("the client's connection reached the Pod");
    std::thread::sleep(Duration::from_millis(300));
    (sender, receiver)
}

/// Every byte arrived, and the Pod saw the outside client's own address.
fn finish_stream(sender: JoinHandle<()>, receiver: JoinHandle<(usize, SocketAddr)>) {
    sender.join().unwrap();
    let (got, peer) = receiver.join().unwrap();
    assert_eq!(got, STREAM_BYTES, "the whole stream arrived");
    assert_eq!(
        peer.ip().to_string(),
        CLIENT,
        "the Pod saw the outside client's own address"
    );
}

#[test]
fn nat_03_daemons_killed_during_an_inbound_32_mb_stream_lose_no_byte() {
    let mut run =
        Run::start(&scenario([NODE, CARRIER]), &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&web(NODE)).unwrap();
    // The upstream router sends the ElasticIP's packets to the carrier: the overlay
    // carry is in the path.
    pin_upstream(&run, 1);
    // One chunk every 12 ms, stopping halfway until both daemons were killed and
    // started again: the kills fall inside the stream, however long a restart takes.
    let (go_on, hold) = std::sync::mpsc::channel();
    let (sender, receiver) = start_stream(&run, Duration::from_millis(12), Some(hold));
    for node in [CARRIER, NODE] {
        let old = common::sigkill_daemon(&run, node);
        common::wait_restarted(&run, node, old);
    }
    go_on.send(()).unwrap();
    finish_stream(sender, receiver);
    run.teardown(&mut |_| {}).unwrap();
}

/// A layout change while the stream runs: the Pod's Node's daemon stops, what it pinned
/// becomes "another version" (`v0`), and the next daemon builds its maps afresh from the
/// cluster (the ElasticIP's entry, the port's public address), carries the connection
/// table over and only then removes the old folder. The old programs keep the stream
/// going until the new ones are attached.
#[test]
fn nat_03_a_layout_change_during_an_inbound_stream_loses_no_byte() {
    let mut run = Run::start(
        &scenario(["el-a", "el-b"]),
        &Options::default(),
        &mut |_| {},
    )
    .expect("start");
    run.add_pod(&web("el-a")).unwrap();
    // The stream stops halfway until the change is done: its first half runs on the
    // old layout, its second on the new one's programs and maps, whatever the time the
    // change takes.
    let (go_on, hold) = std::sync::mpsc::channel();
    let (sender, receiver) = start_stream(&run, Duration::from_millis(12), Some(hold));
    run.daemons.stop("el-a");
    let root = juneau::standalone::pin_dir_of("el-a");
    let current = format!("v{}", juneau_common::LAYOUT_VERSION);
    std::fs::rename(root.join(&current), root.join("v0")).unwrap();
    run.daemons.start("el-a", Duration::from_secs(20)).unwrap();
    assert!(!root.join("v0").exists(), "the old layout's pins are gone");
    go_on.send(()).unwrap();
    finish_stream(sender, receiver);
    run.teardown(&mut |_| {}).unwrap();
}

/// Deleting the attachment ends its mapping: the Pod's Node drops the ElasticIP's 1:1
/// entry, and a datagram the client still sends to the address (its router's
/// neighbour entry still names the Node) never reaches the Pod, read at its socket.
#[test]
fn nat_03_a_deleted_attachment_ends_its_mapping_and_new_packets_are_refused() {
    use std::{net::UdpSocket, time::Instant};
    let mut run = Run::start(
        &scenario(["ed-a", "ed-b"]),
        &Options::default(),
        &mut |_| {},
    )
    .expect("start");
    run.add_pod(&web("ed-a")).unwrap();
    let pod_ns = run.pod("web").expect("the Pod").ns.path().to_owned();
    let socket = juneau::netns::run_in(&pod_ns, || UdpSocket::bind(("0.0.0.0", PORT)))
        .unwrap()
        .unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let client = ns(&run, "client");
    let send = |what: &str| {
        juneau::netns::run_in(&client, || {
            let s = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
            s.send_to(what.as_bytes(), (EIP, PORT)).unwrap();
        })
        .unwrap()
    };
    // The upstream router keeps sending the address to the Pod's Node, whatever ARP
    // says after the deletion: the datagrams below reach it (counted on its uplink).
    pin_upstream(&run, 0);
    let node_ns = run.netns_name("ed-a").unwrap();
    let received = || -> u64 {
        let out = std::process::Command::new("ip")
            .args(["-n", &node_ns, "-j", "-s", "link", "show", "ul0"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["stats64"]["rx"]["packets"].as_u64().unwrap()
    };
    let mut buf = [0u8; 64];
    // Reached while attached (written once the Pod's endpoint is).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        send("before");
        if let Ok((n, peer)) = socket.recv_from(&mut buf)
            && &buf[..n] == b"before"
        {
            assert_eq!(peer.ip().to_string(), CLIENT);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the attached Pod was never reached"
        );
    }
    let mapped = || {
        common::kubectl_juneau_json(&["bpf", "dump", "nat", "--node", "ed-a"])["one_to_one"]
            .as_array()
            .is_some_and(|rows| !rows.is_empty())
    };
    assert!(
        mapped(),
        "the Node maps the ElasticIP 1:1 while it is attached"
    );
    run.store
        .write(|w| w.objects.elastic_ip_attachments.clear());
    let deadline = Instant::now() + Duration::from_secs(20);
    while mapped() {
        assert!(
            Instant::now() < deadline,
            "the Node kept the 1:1 mapping of a deleted attachment"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // What was in flight before the deletion is read and set aside.
    while socket.recv_from(&mut buf).is_ok() {}
    let before = received();
    for _ in 0..5 {
        send("after");
    }
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let got = socket.recv_from(&mut buf).map(|(n, _)| buf[..n].to_vec());
    assert!(
        got.is_err(),
        "a datagram reached the Pod after its attachment was deleted: {got:?}"
    );
    assert!(
        received() >= before + 5,
        "the datagrams sent after the deletion reached the Pod's Node"
    );
    run.teardown(&mut |_| {}).unwrap();
}
