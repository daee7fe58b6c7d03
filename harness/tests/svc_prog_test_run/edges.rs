//! What else a translated connection meets: ICMP errors quoting it, fragments, a
//! backend behind the Node's stack (SVC-02), a Pod reaching itself (hairpin).
use super::*;

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
