//! What a Service's connections keep (SVC-03): affinity, a reset without endpoints, a
//! full table, the sweep, and the daemon's restart.
use super::*;

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
