//! BPF_PROG_TEST_RUN tests of ClusterIP Services in the datapath (SVC-01, SVC-03): the
//! first packet of a connection from a Subnet Pod to a ClusterIP leaves translated to
//! its backend (bytes compared, checksums valid), the reply is given the ClusterIP back
//! where it is delivered, later packets keep their backend, Maglev spreads new
//! connections, affinity keeps a client, a Service without endpoints rejects with ICMP
//! port unreachable (counted, no entry made), and a full table refuses new connections
//! while established ones keep flowing.
//!
//! Subnet S (10.0.3.0/24): the client on port 0, backends on ports 1 and 2.
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::features::services::node::{Frontend, FrontendKey, ServiceState};
use juneau::node::dataplane::{PortKind, PortSpec, Whole};
use juneau_common::{
    FdbKey,
    ct::{
        CT_ESTABLISHED, CT_F_AFFINITY, CT_F_REPLY, CT_F_SERVICE, PROTO_TCP, PROTO_UDP, ZONE_HOST,
    },
    svc::SvcHost,
};
use juneau_harness::{
    frames::{self, fixtures::*, ones_complement},
    router::{self, RouterBed, Seg},
    testrun::{PortBed, TC_ACT_REDIRECT, TC_ACT_SHOT},
};

mod edges;
mod state;

const VNI_S: u32 = 12;
const GW_S: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 12];
const SEG_S: Seg = Seg {
    vni: VNI_S,
    cidr: "10.0.3.0/24",
    gw: [10, 0, 3, 1],
    gw_mac: GW_S,
    mtu: 1500,
};
const DNS: [u8; 4] = [10, 96, 0, 10];
const API: [u8; 4] = [10, 96, 0, 1];
const EMPTY: [u8; 4] = [10, 96, 0, 20];
const STICKY: [u8; 4] = [10, 96, 0, 30];
/// A Service whose backend is a Node's address (SVC-02), and that Node's address.
const KUBE: [u8; 4] = [10, 96, 0, 40];
const NODE_ADDR: [u8; 4] = [172, 18, 0, 2];
/// This Node's Service source address, and its Service device's MAC.
const SOURCE: [u8; 4] = [10, 0, 3, 250];
const DEVICE_MAC: [u8; 6] = [0x02, 0x5e, 0x77, 0, 0, 1];
/// A Service whose only backend is the client itself (hairpin), and the address the
/// client's source becomes.
const SELF_SVC: [u8; 4] = [10, 96, 0, 50];
const HAIRPIN: [u8; 4] = [169, 254, 42, 1];

const fn s_ip(i: u8) -> [u8; 4] {
    [10, 0, 3, 10 + i]
}

fn client(sport: u16) -> ([u8; 6], [u8; 4], u16) {
    (pod_mac(0), s_ip(0), sport)
}

fn services() -> ServiceState {
    let key = |ip: [u8; 4], port, proto| FrontendKey {
        ip: ip.into(),
        port,
        proto,
    };
    let be = |i: u8, port| (Ipv4Addr::from(s_ip(i)), port);
    ServiceState {
        frontends: BTreeMap::from([
            (
                key(DNS, 53, PROTO_UDP),
                Frontend {
                    backends: vec![be(1, 5353)],
                    affinity_s: None,
                },
            ),
            (
                key(API, 443, PROTO_TCP),
                Frontend {
                    backends: vec![be(1, 6443), be(2, 6443)],
                    affinity_s: None,
                },
            ),
            (key(EMPTY, 80, PROTO_TCP), Frontend::default()),
            (
                key(SELF_SVC, 80, PROTO_TCP),
                Frontend {
                    backends: vec![be(0, 8080)],
                    affinity_s: None,
                },
            ),
            (
                key(KUBE, 443, PROTO_TCP),
                Frontend {
                    backends: vec![(NODE_ADDR.into(), 6443)],
                    affinity_s: None,
                },
            ),
            (
                key(STICKY, 80, PROTO_TCP),
                Frontend {
                    backends: vec![be(1, 8080), be(2, 8080)],
                    affinity_s: Some(10_800),
                },
            ),
        ]),
        host_backends: [NODE_ADDR.into()].into(),
        provider_backends: Default::default(),
    }
}

/// The router and the three Subnet ports on `dp`, as the daemon writes them.
fn plumb(dp: &mut Whole, bed: &PortBed) {
    let here = Ipv4Addr::UNSPECIFIED;
    let state = router::state(
        &[SEG_S],
        &(0..3u8)
            .map(|i| (VNI_S, s_ip(i), pod_mac(i), here))
            .collect::<Vec<_>>(),
    );
    dp.sync_router(&state).unwrap();
    for i in 0..3u8 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i as usize),
            vni: VNI_S,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Subnet {
                mac: pod_mac(i),
                ip: s_ip(i).into(),
            },
        })
        .unwrap();
    }
}

fn bed_sized(ct_entries: u32) -> RouterBed {
    let bed = PortBed::new(3);
    let mut dp = Whole::of(juneau::node::Dataplane::load_sized(None, ct_entries).expect("load"))
        .expect("writers");
    plumb(&mut dp, &bed);
    dp.sync_services(&services()).unwrap();
    RouterBed { bed, dp }
}

fn bed() -> RouterBed {
    bed_sized(1024)
}

fn assert_checksums(f: &[u8]) {
    assert_eq!(ones_complement(&f[14..34]), 0, "IPv4 header checksum");
}

/// The backend (port index) a translated frame went to, by its destination address.
fn backend_of(frame: &[u8]) -> u8 {
    frame[33] - 10
}

#[test]
fn svc_01_the_first_packet_goes_to_its_backend_and_the_reply_gets_the_cluster_ip_back() {
    let b = bed();
    // A DNS query to the ClusterIP, sent to the gateway's MAC as every off-link packet.
    let query = frames::udp_ports(client(40000), (GW_S, DNS, 53), b"query");
    let run = b.send(0, &query);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    // Within the Subnet: no hop, the sender's MAC kept; to the backend and its port.
    let want = frames::udp_ports(client(40000), (pod_mac(1), s_ip(1), 5353), b"query");
    assert_eq!(
        run.data, want,
        "translated to the backend, checksums as a sender's"
    );
    // Its pair of entries, in the client's zone.
    let ct = b.dp.conntrack.entries().unwrap();
    assert_eq!(ct.len(), 2, "{ct:?}");
    assert!(
        ct.iter()
            .all(|(k, e)| k.zone == VNI_S && e.flags & CT_F_SERVICE != 0)
    );
    // The backend's answer, routed to the client: the ClusterIP and port are its source.
    let answer = frames::udp_ports(
        (pod_mac(1), s_ip(1), 5353),
        (pod_mac(0), s_ip(0), 40000),
        b"answer",
    );
    let run = b.send(1, &answer);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let want = frames::udp_ports(
        (pod_mac(1), DNS, 53),
        (pod_mac(0), s_ip(0), 40000),
        b"answer",
    );
    assert_eq!(run.data, want, "the reply leaves as the ClusterIP's");
    let ct = b.dp.conntrack.entries().unwrap();
    assert!(
        ct.iter().all(|(_, e)| e.state == CT_ESTABLISHED),
        "answered: both directions established {ct:?}"
    );
    // A packet the backend sends that no connection expects keeps its own source.
    let other = frames::udp_ports(
        (pod_mac(1), s_ip(1), 5353),
        (pod_mac(0), s_ip(0), 40001),
        b"x",
    );
    assert_eq!(b.send(1, &other).data, other);
}

/// A change of a Service's endpoints rewrites its Maglev table where it is (no new
/// table swapped in, so no wait for running programs): new connections take the new
/// endpoints at once, an established one keeps its backend, and the change back
/// restores the spread.
#[test]
fn svc_01_an_endpoint_change_rewrites_the_services_table_in_place() {
    let mut b = bed();
    let syn = |sport: u16| frames::tcp(client(sport), (GW_S, API, 443), true, b"");
    let first = backend_of(&b.send(0, &syn(40000)).data);
    let gone = 3 - first;
    // The API's backends without `gone`.
    let mut want = services();
    let api = FrontendKey {
        ip: API.into(),
        port: 443,
        proto: PROTO_TCP,
    };
    want.frontends.get_mut(&api).unwrap().backends = vec![(Ipv4Addr::from(s_ip(first)), 6443)];
    let done = b.dp.sync_services(&want).unwrap();
    assert_eq!((done.tables, done.rewritten), (0, 1), "{done:?}");
    for sport in 0..32u16 {
        let run = b.send(0, &syn(41000 + sport));
        assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
        assert_eq!(backend_of(&run.data), first, "only the endpoint left");
    }
    // The established connection keeps its backend.
    let data = frames::tcp(client(40000), (GW_S, API, 443), false, b"GET /");
    assert_eq!(backend_of(&b.send(0, &data).data), first);
    // Both again: rewritten in place again, and both take new connections.
    let done = b.dp.sync_services(&services()).unwrap();
    assert_eq!((done.tables, done.rewritten), (0, 1), "{done:?}");
    let mut used = [0u32; 3];
    for sport in 0..64u16 {
        used[backend_of(&b.send(0, &syn(42000 + sport)).data) as usize] += 1;
    }
    assert!(used[gone as usize] > 10, "{used:?}");
}

#[test]
fn svc_01_tcp_is_translated_and_every_later_packet_keeps_its_backend() {
    let b = bed();
    let syn = frames::tcp(client(50000), (GW_S, API, 443), true, b"");
    let run = b.send(0, &syn);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_checksums(&run.data);
    let first = backend_of(&run.data);
    assert!(first == 1 || first == 2);
    let want = frames::tcp(
        client(50000),
        (pod_mac(first), s_ip(first), 6443),
        true,
        b"",
    );
    assert_eq!(run.data, want);
    // The next segments of the connection: the same backend, whatever the table says.
    for _ in 0..5 {
        let data = frames::tcp(client(50000), (GW_S, API, 443), false, b"GET /version");
        let run = b.send(0, &data);
        assert_eq!(backend_of(&run.data), first);
        let want = frames::tcp(
            client(50000),
            (pod_mac(first), s_ip(first), 6443),
            false,
            b"GET /version",
        );
        assert_eq!(run.data, want);
    }
    // New connections are spread by Maglev over both backends.
    let mut used = [0u32; 3];
    for sport in 0..64u16 {
        let run = b.send(
            0,
            &frames::tcp(client(51000 + sport), (GW_S, API, 443), true, b""),
        );
        assert_eq!(run.verdict, TC_ACT_REDIRECT);
        used[backend_of(&run.data) as usize] += 1;
    }
    assert!(
        used[1] > 10 && used[2] > 10,
        "both backends take connections: {used:?}"
    );
}

#[test]
fn svc_01_a_vpc_that_does_not_consume_services_routes_a_cluster_ip_as_any_address() {
    let mut b = bed();
    let mut state = router::state(
        &[SEG_S],
        &(0..3u8)
            .map(|i| (VNI_S, s_ip(i), pod_mac(i), Ipv4Addr::UNSPECIFIED))
            .collect::<Vec<_>>(),
    );
    state.segments.get_mut(&VNI_S).unwrap().services = false;
    b.dp.sync_router(&state).unwrap();
    let query = frames::udp_ports(client(40000), (GW_S, DNS, 53), b"query");
    let run = b.send(0, &query);
    // No route to the Service CIDR in the Vpc: network unreachable back to the client,
    // and no connection made.
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(run.data[23], 1, "ICMP");
    assert_eq!((run.data[34], run.data[35]), (3, 0), "network unreachable");
    assert!(b.dp.conntrack.entries().unwrap().is_empty());
}

/// A pin folder of this test's own, as a daemon's: its datapaths load over it (the
/// second one adopts what the first pinned), and it goes by name when the test ends,
/// also when an assertion fails.
struct Pins {
    name: String,
    root: std::path::PathBuf,
}

impl Pins {
    fn new(prefix: &str) -> Self {
        let name = format!("{prefix}-{}", std::process::id());
        let root = juneau::standalone::pin_dir_of(&name);
        let _ = std::fs::remove_dir_all(&root);
        Self { name, root }
    }

    fn load(&self) -> Whole {
        Whole::of(juneau::node::Dataplane::load_sized(Some(&self.root), 1024).expect("load"))
            .expect("writers")
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `frame` into port 0's program on a bed whose datapath is not a `RouterBed`'s (one
/// loaded over a pin folder).
fn from_port0(dp: &Whole, bed: &PortBed, frame: &[u8]) -> juneau_harness::testrun::Run {
    juneau_harness::testrun::run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(0), frame, 1)
}
