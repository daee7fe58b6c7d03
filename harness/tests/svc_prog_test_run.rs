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

use juneau::node::{
    dataplane::{PortKind, PortSpec, Whole},
    services::{Frontend, FrontendKey, ServiceState},
};
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
fn svc_01_an_icmp_error_about_a_translated_packet_quotes_the_cluster_ip_to_its_client() {
    let b = bed();
    let query = frames::udp_ports(client(40000), (GW_S, DNS, 53), b"query");
    let run = b.send(0, &query);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let translated = run.data;
    // The backend refuses it: port unreachable quoting what it received.
    const UNREACHABLE: (u8, u8, [u8; 4]) = (3, 3, [0; 4]);
    let refusal = frames::icmp_error(
        (pod_mac(1), s_ip(1)),
        (pod_mac(0), s_ip(0)),
        UNREACHABLE,
        &translated,
    );
    let run = b.send(1, &refusal);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    // The client gets it as the ClusterIP's, quoting the query as it sent it: every
    // checksum (outer, quoted header, quoted UDP, the error's own) as a sender's.
    let want = frames::icmp_error(
        (pod_mac(1), DNS),
        (pod_mac(0), s_ip(0)),
        UNREACHABLE,
        &query,
    );
    assert_eq!(run.data, want, "the error quotes the Service");
    // From a hop on the way (fragmentation needed): only the quote is the Service's.
    const FRAG_NEEDED: (u8, u8, [u8; 4]) = (3, 4, [0, 0, 5, 0x78]);
    let hop = s_ip(2);
    let error = frames::icmp_error(
        (pod_mac(2), hop),
        (pod_mac(0), s_ip(0)),
        FRAG_NEEDED,
        &translated,
    );
    let run = b.send(2, &error);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let want = frames::icmp_error(
        (pod_mac(2), hop),
        (pod_mac(0), s_ip(0)),
        FRAG_NEEDED,
        &query,
    );
    assert_eq!(run.data, want, "a hop keeps its own address");
    // An error quoting no Service connection is delivered as it is.
    let other = frames::udp_ports(client(40001), (pod_mac(1), s_ip(1), 5353), b"x");
    let error = frames::icmp_error(
        (pod_mac(1), s_ip(1)),
        (pod_mac(0), s_ip(0)),
        UNREACHABLE,
        &other,
    );
    assert_eq!(b.send(1, &error).data, error);
}

#[test]
fn svc_01_a_fragmented_datagram_is_translated_whole_both_ways() {
    let b = bed();
    let payload = [5u8; 600];
    let (first, later) = frames::fragments(
        &frames::udp_ports(client(40003), (GW_S, DNS, 53), &payload),
        304,
        0x5151,
    );
    let run = b.send(0, &first);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let to = backend_of(&run.data);
    // Each fragment as the translated datagram's would be: the first with the backend's
    // port and the datagram's checksum over it, the later one its address only.
    let translated = frames::udp_ports(client(40003), (pod_mac(to), s_ip(to), 5353), &payload);
    let (want_first, want_later) = frames::fragments(&translated, 304, 0x5151);
    assert_eq!(run.data, want_first, "the first fragment to the backend");
    let run = b.send(0, &later);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(
        run.data, want_later,
        "the later fragment to the same backend"
    );
    // The backend's large answer, fragmented: both fragments from the ClusterIP again.
    let answer = frames::udp_ports(
        (pod_mac(to), s_ip(to), 5353),
        (pod_mac(0), s_ip(0), 40003),
        &payload,
    );
    let (first, later) = frames::fragments(&answer, 304, 0x6161);
    let want = frames::fragments(
        &frames::udp_ports(
            (pod_mac(to), DNS, 53),
            (pod_mac(0), s_ip(0), 40003),
            &payload,
        ),
        304,
        0x6161,
    );
    assert_eq!(
        b.send(to as usize, &first).data,
        want.0,
        "the answer's first fragment"
    );
    assert_eq!(
        b.send(to as usize, &later).data,
        want.1,
        "its later fragment"
    );
    // A later fragment whose first never came is routed as it is: to the ClusterIP,
    // which no route holds.
    let (_, stray) = frames::fragments(
        &frames::udp_ports(client(40004), (GW_S, DNS, 53), &payload),
        304,
        0x7171,
    );
    assert_ne!(
        b.send(0, &stray).verdict,
        TC_ACT_REDIRECT,
        "{:?}",
        b.drops()
    );
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
fn svc_02_a_node_address_backend_is_reached_through_the_stack_from_the_source_address() {
    let b = bed();
    let syn = frames::tcp(client(50000), (GW_S, KUBE, 443), true, b"");
    // No source address yet: refused, named, nothing left behind.
    assert_eq!(b.send(0, &syn).verdict, TC_ACT_SHOT);
    assert_eq!(b.drops()["NO_SOURCE_ADDRESS"], 1);
    assert!(b.dp.conntrack.entries().unwrap().is_empty());
    // The Service device is port 2's interface here: what matters is the redirect to
    // it and the bytes.
    let device = b.bed.ifindex(2);
    let mut b = b;
    b.dp.services
        .set_host(SvcHost {
            ifindex: device,
            snat_ip: u32::from_ne_bytes(SOURCE),
            mac: FdbKey::new(DEVICE_MAC),
            provider_vni: 0,
            pad: 0,
        })
        .unwrap();
    let run = b.send(0, &syn);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    // Both addresses translated, the client's port kept (it is free), the device's
    // MAC as destination so the stack takes it; checksums as a sender's.
    let want = frames::tcp(
        (pod_mac(0), SOURCE, 50000),
        (DEVICE_MAC, NODE_ADDR, 6443),
        true,
        b"",
    );
    assert_eq!(run.data, want);
    let ct = b.dp.conntrack.entries().unwrap();
    assert_eq!(ct.len(), 3, "the pair and the stack's reply entry: {ct:?}");
    let host = ct
        .iter()
        .find(|(k, _)| k.zone == ZONE_HOST)
        .expect("an entry in the host zone");
    assert_eq!(host.0.daddr, u32::from_ne_bytes(SOURCE));
    assert_eq!(host.1.nat_zone, VNI_S);
    // A second client with the same port toward the same backend gets another port.
    let other = frames::tcp((pod_mac(1), s_ip(1), 50000), (GW_S, KUBE, 443), true, b"");
    let run = b.send(1, &other);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let sport = u16::from_be_bytes([run.data[34], run.data[35]]);
    assert_ne!(sport, 50000, "a port of its own");
    assert!((32768..61000).contains(&sport));
    assert_eq!(&run.data[26..30], &SOURCE);
    // The Node's answer to the source address, as the stack routes it out of the
    // device to its peer: svc_host gives it back to the client as the ClusterIP's.
    let answer = frames::tcp(
        ([0x02, 0x5e, 0x77, 0, 0, 2], NODE_ADDR, 6443),
        (DEVICE_MAC, SOURCE, 50000),
        false,
        b"v1.37",
    );
    let run = b.bed.send(b.dp.program("svc_host"), 2, &answer);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let want = frames::tcp((GW_S, KUBE, 443), client(50000), false, b"v1.37");
    assert_eq!(run.data, want, "to the client, from the ClusterIP");
    // Later packets of the connection keep their source port.
    let data = frames::tcp(client(50000), (GW_S, KUBE, 443), false, b"GET");
    let run = b.send(0, &data);
    let want = frames::tcp(
        (pod_mac(0), SOURCE, 50000),
        (DEVICE_MAC, NODE_ADDR, 6443),
        false,
        b"GET",
    );
    assert_eq!(run.data, want);
    // What no connection expects at the device is dropped under its name.
    let stray = frames::tcp(
        ([0x02, 0x5e, 0x77, 0, 0, 2], NODE_ADDR, 6443),
        (DEVICE_MAC, SOURCE, 40000),
        false,
        b"x",
    );
    assert_eq!(
        b.bed.send(b.dp.program("svc_host"), 2, &stray).verdict,
        TC_ACT_SHOT
    );
    assert_eq!(b.drops()["NOT_A_REPLY"], 1);
}

#[test]
fn svc_01_a_pod_reaches_itself_through_its_service_and_its_reply_comes_back_translated() {
    let b = bed();
    let syn = frames::tcp(client(50000), (GW_S, SELF_SVC, 80), true, b"");
    let run = b.send(0, &syn);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    // To itself at the target port, from the hairpin address: its reply must leave it.
    let want = frames::tcp(
        (pod_mac(0), HAIRPIN, 50000),
        (pod_mac(0), s_ip(0), 8080),
        true,
        b"",
    );
    assert_eq!(run.data, want);
    // Its answer to the hairpin address, through its gateway: from the ClusterIP, to
    // itself, as its socket expects.
    let answer = frames::tcp(
        (pod_mac(0), s_ip(0), 8080),
        (GW_S, HAIRPIN, 50000),
        false,
        b"ok",
    );
    let run = b.send(0, &answer);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let want = frames::tcp(
        (pod_mac(0), SELF_SVC, 80),
        (pod_mac(0), s_ip(0), 50000),
        false,
        b"ok",
    );
    assert_eq!(run.data, want);
    let ct = b.dp.conntrack.entries().unwrap();
    assert_eq!(ct.len(), 2, "{ct:?}");
    assert!(
        ct.iter().all(|(_, e)| e.state == CT_ESTABLISHED),
        "answered: {ct:?}"
    );
    // The next packet of the connection keeps both translations.
    let data = frames::tcp(client(50000), (GW_S, SELF_SVC, 80), false, b"more");
    let want = frames::tcp(
        (pod_mac(0), HAIRPIN, 50000),
        (pod_mac(0), s_ip(0), 8080),
        false,
        b"more",
    );
    assert_eq!(b.send(0, &data).data, want);
}

#[test]
fn svc_03_affinity_keeps_a_client_on_its_backend_where_maglev_would_not() {
    let mut b = bed();
    // A new connection to STICKY from the Pod on `port`: the backend it went to.
    let connect = |b: &RouterBed, port: u8, sport: u16| {
        let syn = frames::tcp(
            (pod_mac(port), s_ip(port), sport),
            (GW_S, STICKY, 80),
            true,
            b"",
        );
        let run = b.send(port as usize, &syn);
        assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
        backend_of(&run.data)
    };
    // What Maglev alone does with these connections, the Service without affinity
    // (same backends, so the same table; the flow hash is the kernel's, fixed for a
    // boot), for the client on port 0 and another on port 1.
    let sticky = FrontendKey {
        ip: STICKY.into(),
        port: 80,
        proto: PROTO_TCP,
    };
    let mut plain = services();
    plain.frontends.get_mut(&sticky).unwrap().affinity_s = None;
    b.dp.sync_services(&plain).unwrap();
    let ports: Vec<u16> = (1000..1040).collect();
    let maglev: Vec<[u8; 2]> = ports
        .iter()
        .map(|p| [connect(&b, 0, *p), connect(&b, 1, *p)])
        .collect();
    // Those connections go (a day later), so the same ports open anew.
    let now = juneau::node::dataplane::monotonic_coarse_ns();
    b.dp.conntrack
        .sweep(Some(now + 86_400_000_000_000))
        .unwrap();
    assert!(b.dp.conntrack.entries().unwrap().is_empty());
    b.dp.sync_services(&services()).unwrap();
    let first = connect(&b, 0, ports[0]);
    assert_eq!(first, maglev[0][0], "the first connection by Maglev");
    // Without ports Maglev sends elsewhere this test could not tell affinity from
    // Maglev (one backend, or a hash that ignores the source port).
    let elsewhere = maglev[1..].iter().filter(|m| m[0] != first).count();
    assert!(elsewhere > 0, "Maglev: {maglev:?}");
    for sport in &ports[1..] {
        assert_eq!(connect(&b, 0, *sport), first, "source port {sport}");
    }
    // Counted as chosen by affinity (trace and dumps say so): all but the first.
    let by_affinity =
        b.dp.conntrack
            .entries()
            .unwrap()
            .iter()
            .filter(|(k, e)| {
                k.daddr == u32::from_ne_bytes(STICKY)
                    && e.flags & CT_F_REPLY == 0
                    && e.flags & CT_F_AFFINITY != 0
            })
            .count();
    assert_eq!(by_affinity, ports.len() - 1);
    // Affinity is per client: another one's first connection goes where Maglev sends
    // it, also to the backend that is not the first client's, and its next ones stay
    // there, also where Maglev would send them to the first client's.
    let (i, theirs) = maglev
        .iter()
        .enumerate()
        .find(|(_, m)| m[1] != first)
        .map(|(i, m)| (i, m[1]))
        .unwrap_or_else(|| panic!("no port Maglev sends elsewhere: {maglev:?}"));
    assert_eq!(connect(&b, 1, ports[i]), theirs, "not the first client's");
    let toward_first: Vec<u16> = ports
        .iter()
        .zip(&maglev)
        .filter(|(_, m)| m[1] == first)
        .map(|(p, _)| *p)
        .collect();
    assert!(!toward_first.is_empty(), "Maglev: {maglev:?}");
    for sport in toward_first {
        assert_eq!(connect(&b, 1, sport), theirs, "second client, port {sport}");
    }
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

#[test]
fn svc_03_a_service_without_endpoints_rejects_tcp_with_a_reset_counted() {
    let b = bed();
    let syn = frames::tcp(client(50000), (GW_S, EMPTY, 80), true, b"");
    let run = b.send(0, &syn);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "sent back to the client");
    let f = &run.data;
    assert_eq!(&f[..6], &pod_mac(0), "to the client");
    assert_eq!(f[23], 6, "TCP");
    assert_eq!(&f[26..30], &EMPTY, "from the ClusterIP");
    assert_eq!(&f[30..34], &s_ip(0));
    assert_eq!(
        (&f[34..36], &f[36..38]),
        (&syn[36..38], &syn[34..36]),
        "ports swapped"
    );
    assert_eq!(f[47], 0x14, "RST|ACK");
    assert_eq!(
        u32::from_be_bytes([f[42], f[43], f[44], f[45]]),
        u32::from_be_bytes([syn[38], syn[39], syn[40], syn[41]]) + 1,
        "acknowledging the SYN"
    );
    assert_checksums(f);
    assert_eq!(b.drops()["SVC_NO_ENDPOINTS"], 1);
    assert!(
        b.dp.conntrack.entries().unwrap().is_empty(),
        "a refused connection leaves no entry"
    );
}

#[test]
fn svc_03_a_full_table_refuses_new_connections_and_keeps_established_ones() {
    // Room for two connections (two entries each).
    let b = bed_sized(4);
    for sport in [40000, 40001] {
        let run = b.send(0, &frames::udp_ports(client(sport), (GW_S, DNS, 53), b"q"));
        assert_eq!(run.verdict, TC_ACT_REDIRECT);
    }
    let run = b.send(0, &frames::udp_ports(client(40002), (GW_S, DNS, 53), b"q"));
    assert_eq!(run.verdict, TC_ACT_SHOT, "a third connection is refused");
    assert_eq!(b.drops()["CT_FULL"], 1);
    // The established two keep flowing, both ways.
    for sport in [40000, 40001] {
        let run = b.send(
            0,
            &frames::udp_ports(client(sport), (GW_S, DNS, 53), b"again"),
        );
        assert_eq!(run.verdict, TC_ACT_REDIRECT, "{sport}");
        let answer = frames::udp_ports(
            (pod_mac(1), s_ip(1), 5353),
            (pod_mac(0), s_ip(0), sport),
            b"a",
        );
        let run = b.send(1, &answer);
        assert_eq!(
            &run.data[26..30],
            &DNS,
            "{sport}: answered as the ClusterIP"
        );
    }
    assert_eq!(b.drops()["CT_FULL"], 1);
    assert_eq!(b.dp.conntrack.entries().unwrap().len(), 4);
}

#[test]
fn svc_03_the_sweep_collects_finished_connections_and_keeps_live_ones() {
    let mut b = bed();
    b.send(0, &frames::udp_ports(client(40000), (GW_S, DNS, 53), b"q"));
    let now = juneau::node::dataplane::monotonic_coarse_ns();
    assert_eq!(b.dp.conntrack.sweep(Some(now)).unwrap(), 0, "live");
    assert_eq!(
        b.dp.conntrack.sweep(Some(now + 61_000_000_000)).unwrap(),
        2,
        "a minute of silence ends a UDP connection, both directions"
    );
    assert!(b.dp.conntrack.entries().unwrap().is_empty());
    // A reply entry whose original direction is gone (removed here by hand) is judged
    // by itself, the sweep's second pass: kept while it is live, collected after its
    // own lifetime, never left for ever.
    b.send(0, &frames::udp_ports(client(40001), (GW_S, DNS, 53), b"q"));
    let now = juneau::node::dataplane::monotonic_coarse_ns();
    let original =
        b.dp.conntrack
            .entries()
            .unwrap()
            .iter()
            .find(|(_, e)| e.flags & CT_F_REPLY == 0)
            .map(|(k, _)| *k)
            .expect("the original direction");
    b.dp.conntrack.remove(&original).unwrap();
    assert_eq!(
        b.dp.conntrack.sweep(Some(now)).unwrap(),
        0,
        "a live reply stays"
    );
    assert_eq!(
        b.dp.conntrack.entries().unwrap().len(),
        1,
        "the reply alone"
    );
    assert_eq!(
        b.dp.conntrack.sweep(Some(now + 61_000_000_000)).unwrap(),
        1,
        "a minute of silence ends the reply left alone"
    );
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

#[test]
fn svc_03_connections_outlive_the_daemon_and_keep_their_backend() {
    let pins = Pins::new("jn-svcpin");
    let bed = PortBed::new(3);
    let load = || pins.load();
    let mut dp = load();
    plumb(&mut dp, &bed);
    dp.sync_services(&services()).unwrap();
    let send = |dp: &Whole, frame: &[u8]| from_port0(dp, &bed, frame);
    let syn = frames::tcp(client(50000), (GW_S, API, 443), true, b"");
    let backend = backend_of(&send(&dp, &syn).data);
    // The daemon goes; the next adopts the pinned table before any sync of its own.
    drop(dp);
    let dp = load();
    assert!(dp.adopted());
    assert_eq!(
        dp.conntrack.entries().unwrap().len(),
        2,
        "the connection's entries kept"
    );
    let data = frames::tcp(client(50000), (GW_S, API, 443), false, b"more");
    let run = send(&dp, &data);
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    assert_eq!(
        backend_of(&run.data),
        backend,
        "the same backend after the restart"
    );
    // Its first sync of Services removes what the previous daemon left and nobody wants.
    let mut dp = dp;
    let mut fewer = services();
    fewer.frontends.retain(|k, _| k.ip != Ipv4Addr::from(DNS));
    dp.sync_services(&fewer).unwrap();
    let query = frames::udp_ports(client(40000), (GW_S, DNS, 53), b"q");
    let run = send(&dp, &query);
    assert_ne!(
        &run.data[30..34],
        &s_ip(1),
        "a removed Service is no longer translated"
    );
    // And an established connection keeps its backend through the new tables.
    assert_eq!(backend_of(&send(&dp, &data).data), backend);
}

/// A restarted daemon's first sync hands out no id that the previous daemon's pinned
/// frontends and tables still name: while it replaces them, a packet that follows an
/// old frontend and table finds the backend they named, not a new one written over it.
#[test]
fn svc_03_a_restarted_daemons_first_sync_writes_over_no_backend_the_old_tables_name() {
    let pins = Pins::new("jn-svcids");
    let bed = PortBed::new(3);
    let load = || pins.load();
    let backends = || {
        juneau::cli::dump_backends(&juneau::cli::node_dir(&pins.name), &Default::default())
            .expect("the pinned backends")
    };
    let mut dp = load();
    plumb(&mut dp, &bed);
    dp.sync_services(&services()).unwrap();
    let before = backends();
    assert!(before.len() >= 4, "{before:?}");
    drop(dp);
    let mut dp = load();
    assert!(dp.adopted());
    // The API moves to another port: two new backends.
    let mut moved = services();
    let api = FrontendKey {
        ip: API.into(),
        port: 443,
        proto: PROTO_TCP,
    };
    moved.frontends.get_mut(&api).unwrap().backends = vec![
        (Ipv4Addr::from(s_ip(1)), 7443),
        (Ipv4Addr::from(s_ip(2)), 7443),
    ];
    dp.sync_services(&moved).unwrap();
    let after = backends();
    for b in &before {
        assert!(
            after
                .iter()
                .any(|a| a.id == b.id && a.addr == b.addr && a.port == b.port),
            "backend {} ({}:{}) written over by the first sync: {after:?}",
            b.id,
            b.addr,
            b.port
        );
    }
    let new: Vec<_> = after.iter().filter(|a| a.port == 7443).collect();
    assert_eq!(new.len(), 2, "{after:?}");
    assert!(new.iter().all(|n| before.iter().all(|b| b.id != n.id)));
    // And the moved Service takes new connections to its new port.
    let run = from_port0(
        &dp,
        &bed,
        &frames::tcp(client(45000), (GW_S, API, 443), true, b""),
    );
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    assert_eq!(u16::from_be_bytes([run.data[36], run.data[37]]), 7443);
}

/// `frame` into port 0's program on a bed whose datapath is not a `RouterBed`'s (one
/// loaded over a pin folder).
fn from_port0(dp: &Whole, bed: &PortBed, frame: &[u8]) -> juneau_harness::testrun::Run {
    juneau_harness::testrun::run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(0), frame, 1)
}
