//! SVC-03 on real sockets. A Service without a ready endpoint refuses at once (TCP and
//! UDP), also when its last endpoint goes while clients keep coming. A closed Service
//! connection never captures a new one. A client connects
//! through a ClusterIP from a fixed source port, closes (FIN, or RST), then connects
//! from the same port straight to the backend it reached: the backend's answer must
//! reach the client as itself, not be given the ClusterIP back by the old connection's
//! reply entry (which waits for the sweep). And a new connection to the ClusterIP from
//! that port picks its backend afresh. Backends on the client's own Node and on
//! another. Real sockets in the Pods' namespaces.
use std::{
    io::Read,
    net::{SocketAddr, SocketAddrV4, TcpListener},
    os::fd::{AsRawFd, OwnedFd},
    time::{Duration, Instant},
};

use juneau::{
    scenario::Layer,
    standalone::{Options, PodDef, Run, Scenario},
};
use nix::sys::socket::{
    AddressFamily, SockFlag, SockType, SockaddrIn, connect, setsockopt, socket, sockopt,
};

const PORT: u16 = 8080;

/// Both tests run the same Nodes (sockets, pinned maps): one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

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

fn service(name: &str, ip: &str, app: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "clusterIP": ip,
            "selector": {"app": app},
            "ports": [{"port": 80, "targetPort": PORT}],
        },
    })
}

fn scenario() -> Scenario {
    Scenario {
        description: "a client port reused from a ClusterIP connection to a direct one".into(),
        layer: Layer::Stack,
        proves: vec!["SVC-03".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: vec!["ru-a".into(), "ru-b".into()],
        objects: vec![
            service("near", "10.96.0.61", "near"),
            service("far", "10.96.0.62", "far"),
            service("empty", "10.96.0.63", "nobody"),
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "dns-empty"},
                "spec": {
                    "clusterIP": "10.96.0.64",
                    "selector": {"app": "nobody"},
                    "ports": [{"port": 53, "targetPort": 53, "protocol": "UDP"}],
                },
            }),
        ],
        pods: Vec::new(),
        outside: juneau::scenario::Outside::None,
    }
}

/// The Pod's address (its eth0's first IPv4).
fn address_of(run: &Run, pod: &str) -> std::net::Ipv4Addr {
    let ns = run.pod(pod).unwrap().ns.path().to_owned();
    let out = std::process::Command::new("ip")
        .args(["-n"])
        .arg(ns.file_name().unwrap())
        .args(["-4", "-o", "addr", "show", "eth0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let cidr = text
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .unwrap_or_else(|| panic!("no address on {pod}: {text}"));
    cidr.split('/').next().unwrap().parse().unwrap()
}

/// A TCP connection from local port `sport` to `to`, within `within` (SO_REUSEADDR:
/// the port may still be in TIME_WAIT toward another destination). How the attempt
/// ended.
fn connect_from(sport: u16, to: SocketAddrV4, within: Duration) -> nix::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    setsockopt(
        &fd,
        sockopt::SendTimeout,
        &nix::sys::time::TimeVal::new(within.as_secs() as i64, within.subsec_micros() as i64),
    )?;
    let any = SockaddrIn::from(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, sport));
    nix::sys::socket::bind(fd.as_raw_fd(), &any)?;
    connect(fd.as_raw_fd(), &SockaddrIn::from(to))?;
    Ok(fd)
}

/// Closes `fd` with a FIN, or with a RST (SO_LINGER 0).
fn close(fd: OwnedFd, reset: bool) {
    if reset {
        setsockopt(
            &fd,
            sockopt::Linger,
            &libc::linger {
                l_onoff: 1,
                l_linger: 0,
            },
        )
        .unwrap();
    }
    drop(fd);
}

#[test]
fn svc_03_a_port_reused_from_a_closed_cluster_ip_connection_reaches_the_backend_directly() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut run = Run::start(&scenario(), &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&pod("ru-client", "ru-a", None)).unwrap();
    run.add_pod(&pod("ru-near", "ru-a", Some("near"))).unwrap();
    run.add_pod(&pod("ru-far", "ru-b", Some("far"))).unwrap();
    run.settle();
    // Each backend accepts and holds what comes (a reader per connection, closing when
    // its client does).
    for backend in ["ru-near", "ru-far"] {
        let ns = run.pod(backend).unwrap().ns.path().to_owned();
        let listener =
            juneau::netns::run_in(&ns, || TcpListener::bind(("0.0.0.0", PORT)).unwrap()).unwrap();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut conn = conn;
                    let mut sink = [0u8; 64];
                    while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
                });
            }
        });
    }
    let client_ns = run.pod("ru-client").unwrap().ns.path().to_owned();
    let mut sport = 45_000;
    for (service, backend) in [("10.96.0.61", "ru-near"), ("10.96.0.62", "ru-far")] {
        let direct = SocketAddrV4::new(address_of(&run, backend), PORT);
        let cluster_ip = SocketAddrV4::new(service.parse().unwrap(), 80);
        for reset in [false, true] {
            sport += 1;
            let how = format!(
                "{backend} ({}), {} close, port {sport}",
                if backend == "ru-near" {
                    "same Node"
                } else {
                    "another Node"
                },
                if reset { "RST" } else { "FIN" }
            );
            // Through the ClusterIP (the first SYN may meet a route not taken in yet).
            let deadline = Instant::now() + Duration::from_secs(10);
            let through = loop {
                let c = juneau::netns::run_in(&client_ns, || {
                    connect_from(sport, cluster_ip, Duration::from_secs(2))
                })
                .unwrap();
                match c {
                    Ok(fd) => break fd,
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("{how}: through the ClusterIP: {e}; again");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    Err(e) => panic!("{how}: no connection through the ClusterIP: {e}"),
                }
            };
            close(through, reset);
            std::thread::sleep(Duration::from_millis(100));
            // Straight to the backend from the same port: answered at once.
            let start = Instant::now();
            let direct_conn = juneau::netns::run_in(&client_ns, || {
                connect_from(sport, direct, Duration::from_secs(3))
            })
            .unwrap();
            let took = start.elapsed();
            let fd = direct_conn.unwrap_or_else(|e| {
                panic!("{how}: the direct connection failed: {e} after {took:?}")
            });
            assert!(
                took < Duration::from_secs(1),
                "{how}: the direct connection took {took:?} (a SYN-ACK given the ClusterIP back is dropped by the client, which sends the SYN again a second later)"
            );
            let peer: SocketAddr = nix::sys::socket::getpeername::<SockaddrIn>(fd.as_raw_fd())
                .map(|a| SocketAddr::V4(SocketAddrV4::new(a.ip(), a.port())))
                .unwrap();
            assert_eq!(peer, SocketAddr::V4(direct), "{how}");
            close(fd, true);
            std::thread::sleep(Duration::from_millis(100));
            // And through the ClusterIP again from that port: a new connection.
            let again = juneau::netns::run_in(&client_ns, || {
                connect_from(sport, cluster_ip, Duration::from_secs(3))
            })
            .unwrap();
            assert!(again.is_ok(), "{how}: the ClusterIP again: {again:?}");
            close(again.unwrap(), true);
        }
    }
    run.teardown(&mut |_| {}).unwrap();
}

/// How a TCP connect to `to` from `ns` ends, and how long it took.
fn tcp_outcome(ns: &std::path::Path, to: SocketAddrV4) -> (nix::Result<()>, Duration) {
    juneau::netns::run_in(ns, || {
        let start = Instant::now();
        let r = connect_from(0, to, Duration::from_secs(3)).map(drop);
        (r, start.elapsed())
    })
    .unwrap()
}

#[test]
fn svc_03_a_service_without_endpoints_refuses_tcp_and_udp_at_once_also_when_its_last_goes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut run = Run::start(&scenario(), &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&pod("ru-client", "ru-a", None)).unwrap();
    run.add_pod(&pod("ru-far", "ru-b", Some("far"))).unwrap();
    run.settle();
    let ns = run.pod("ru-client").unwrap().ns.path().to_owned();
    // The frontend reaches the client's Node with no backend: the first SYN may come
    // before it does (then it goes to the default route and times out), so the check
    // waits for the refusal, each try bounded.
    let empty = SocketAddrV4::new("10.96.0.63".parse().unwrap(), 80);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (r, took) = tcp_outcome(&ns, empty);
        if r == Err(nix::errno::Errno::ECONNREFUSED) && took < Duration::from_secs(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "TCP to a Service without endpoints: {r:?} after {took:?}, not refused at once"
        );
    }
    // UDP: a connected socket hears the port unreachable as ECONNREFUSED.
    let udp = juneau::netns::run_in(&ns, || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s.connect("10.96.0.64:53").unwrap();
        s.send(b"query").unwrap();
        let start = Instant::now();
        let mut buf = [0u8; 16];
        (s.recv(&mut buf).map_err(|e| e.kind()), start.elapsed())
    })
    .unwrap();
    assert_eq!(
        udp.0,
        Err(std::io::ErrorKind::ConnectionRefused),
        "UDP to a Service without endpoints, after {:?}",
        udp.1
    );
    assert!(udp.1 < Duration::from_secs(1), "{:?}", udp.1);
    // The last endpoint goes while clients keep coming: refused at once after.
    let far = SocketAddrV4::new("10.96.0.62".parse().unwrap(), 80);
    let far_ns = run.pod("ru-far").unwrap().ns.path().to_owned();
    let listener =
        juneau::netns::run_in(&far_ns, || TcpListener::bind(("0.0.0.0", PORT)).unwrap()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tcp_outcome(&ns, far).0.is_err() {
        assert!(Instant::now() < deadline, "the far Service never answered");
    }
    drop(listener);
    run.delete_pod("ru-far").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (r, took) = tcp_outcome(&ns, far);
        if r == Err(nix::errno::Errno::ECONNREFUSED) && took < Duration::from_secs(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after its last endpoint went: {r:?} after {took:?}"
        );
    }
    let drops = juneau::cli::dump_drops(&juneau::cli::node_dir("ru-a")).unwrap();
    let counted = drops
        .iter()
        .find(|(r, _)| r == "SVC_NO_ENDPOINTS")
        .map_or(0, |(_, n)| *n);
    assert!(
        counted >= 3,
        "refusals counted under SVC_NO_ENDPOINTS: {drops:?}"
    );
    run.teardown(&mut |_| {}).unwrap();
}
