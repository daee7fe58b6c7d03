//! NATGateway (NAT-01, NAT-02) on one Node, live frames side by side in one run (median
//! of rotated rounds; the generator and the counting are `bench::LiveFrames`'s, as in
//! `eip_pps`):
//!
//! 1. `pps_natgw_vs_masquerade`: 64-byte IPv4/UDP frames of one connection from a
//!    Subnet Pod (a routed port: its veth runs `gw_route` itself) to 198.51.100.10,
//!    routed by its Vpc's `0.0.0.0/0 via natGateway`: the first packet by `gw_route` ->
//!    `gw_forward` -> `nat_out` (FIB, the connection's mapping, source rewritten to the
//!    Node's address 10.99.0.100), every later one by `gw_route`'s fast path (the
//!    connection's entry and its cached hop), `bpf_redirect` out of the uplink to the
//!    upstream router's namespace. Baseline: the same shape without
//!    Juneau, a plain veth Pod whose Node namespace's kernel forwards and masquerades
//!    (`ip_forward`, an nftables `masquerade` rule on the uplink, conntrack), the same
//!    default route and permanent neighbour. Both translate once and then find the
//!    connection: Juneau in its connection table, the kernel in conntrack.
//! 2. `pps_natgw_vs_bare_redirect`: the ceiling of that path here, one bare
//!    `bpf_redirect` (`floor_redirect`) from a plain Pod's veth to the same kind of
//!    uplink, nothing looked up or rewritten.
//! 3. `nat_port_alloc_at_90pct`: the fraction of new connections that get a port when
//!    90% of the ports (1024-65535) of the Node's address toward one server are held:
//!    the claims are written into the connection table first, then each new
//!    connection's first frame goes through the datapath (a fresh client port each),
//!    its claim removed again after it, so every try meets 90%.
//! 4. `tcp_crr_natgw_vs_masquerade`: new TCP connections a second from the Pod to a
//!    server on the upstream router (198.51.100.10), each connected and reset (linger 0,
//!    so no TIME_WAIT limits the client), one client thread; the same two beds, before
//!    the packet-rate rounds, median of rotated rounds. Each connection is a new mapping
//!    (Juneau: a claim in the connection table; the kernel: conntrack and the masquerade
//!    rule).
//!    Its ceiling, `tcp_crr_natgw_vs_bare_redirect`: the same rounds through a plain
//!    Pod whose veth and uplink forward to each other by one bare `bpf_redirect`.
//! 5. `verifier_nat_out`: instructions the verifier processed for `nat_out`.
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::programs::{SchedClassifier, TcAttachType};
use juneau::features::router::gateway::RouteSpec;
use juneau_common::{
    ct::{CT_F_NAT, CT_F_REPLY, CtEntry, CtKey, ZONE_HOST},
    gw::ROUTE_NAT_GW,
};
use juneau_harness::{
    Netns, Node,
    bench::{
        LiveFrames, Measurement, gro_on, median, nft_counted, nft_load, plain_pods, write_part,
    },
    capture::inject,
    crr,
    frames::{self, fixtures::pod_mac},
    node::PodOptions,
    router::{self, Seg},
    uplink::{self, ROUTER_MAC, if_index, ip, mac_of, uplink},
};

const VNI: u32 = 6201;
const GW_MAC: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x39];
const SEG: Seg = Seg {
    vni: VNI,
    cidr: "10.0.1.0/24",
    gw: [10, 0, 1, 1],
    gw_mac: GW_MAC,
    mtu: 1500,
};
const POD: [u8; 4] = [10, 0, 1, 10];
const NAT_IP: [u8; 4] = [10, 99, 0, 100];
const OUTSIDE: [u8; 4] = [198, 51, 100, 10];
const SPORT: u16 = 40_000;
const DPORT: u16 = 5201;
const TABLE: &str = "jnbenchnat";

/// A Node brought up by the daemon's own code on `ul0`, with one Subnet Pod whose
/// table routes everything via the NATGateway at `NAT_IP`.
fn juneau_node() -> (Node, Netns) {
    let (mut node, upstream) = uplink::juneau_node();
    let vtep = node.ip.expect("the Node's address");
    let mut want = router::state(&[SEG], &[(VNI, POD, pod_mac(0), vtep)]);
    want.tables.get_mut("t").unwrap().insert(RouteSpec {
        dst: "0.0.0.0/0".parse().unwrap(),
        kind: ROUTE_NAT_GW,
        vni: 0,
        gw_ip: Ipv4Addr::UNSPECIFIED,
        gw_mac: [0; 6],
        mtu: 0,
        nh_ip: NAT_IP.into(),
    });
    node.dataplane.sync_router(&want).unwrap();
    node.add_pod_with(0, PodOptions::vni(VNI).subnet(POD));
    gro_on(&node.ns, "jp0");
    (node, upstream)
}

/// The same shape without Juneau: a plain veth Pod (`h0`, gateway 10.0.1.1 on the
/// Node), the Node namespace's kernel forwarding and masquerading out of `ul0`
/// (nftables, conntrack). Returns (Node, Pod, upstream, h0's MAC).
fn masquerade_bed() -> (Netns, Netns, Netns, [u8; 6]) {
    let (node, mut pods) = plain_pods(1);
    let upstream = uplink(&node);
    ip(&node, "addr add 10.0.1.1/24 dev h0");
    let rules = format!(
        "table ip {TABLE} {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    oifname \"ul0\" counter masquerade\n  }}\n}}\n"
    );
    nft_load(&node, &rules);
    gro_on(&node, "h0");
    let h0 = mac_of(&node, "h0");
    (node, pods.pop().unwrap(), upstream, h0)
}

/// A plain Pod whose veth forwards by one bare `bpf_redirect` to its uplink, and the
/// uplink back to the veth (`floor_redirect` both ways, attached by `main`): nothing
/// looked up or rewritten, so the MACs are made to fit instead. The Pod sends to the
/// router's MAC (its gateway's neighbour entry); the upstream routes the Pod's
/// segment via the Node's 10.99.0.1, whose neighbour entry is the Pod's own MAC.
fn ceiling_bed() -> (Netns, Netns, Netns) {
    let (node, mut pods) = plain_pods(1);
    let upstream = uplink(&node);
    gro_on(&node, "h0");
    let pod = pods.pop().unwrap();
    let pod_mac = juneau::format_mac(&mac_of(&pod, "eth0"));
    let router = juneau::format_mac(&ROUTER_MAC);
    address_pod(&pod);
    ip(
        &pod,
        &format!("neigh replace 10.0.1.1 lladdr {router} dev eth0 nud permanent"),
    );
    ip(&upstream, "route add 10.0.1.0/24 via 10.99.0.1");
    ip(
        &upstream,
        &format!("neigh replace 10.99.0.1 lladdr {pod_mac} dev eth0 nud permanent"),
    );
    (node, pod, upstream)
}

/// Loads `name` of the floor object (once) and attaches it to `dev`'s ingress in `ns`.
fn attach(floor: &mut aya::Ebpf, name: &str, ns: &Netns, dev: &str) {
    let prog: &mut SchedClassifier = floor.program_mut(name).unwrap().try_into().unwrap();
    if prog.fd().is_err() {
        prog.load().unwrap_or_else(|e| panic!("load {name}: {e}"));
    }
    ns.run(|| prog.attach(dev, TcAttachType::Ingress))
        .unwrap_or_else(|e| panic!("attach {name}: {e}"));
}

/// Packets the masquerade rule translated (one per new connection).
fn masqueraded(node: &Netns) -> u64 {
    nft_counted(node, TABLE, "postrouting")
}

/// NAT-02's exhaustion: the share of `tries` new connections that got a port with 90% of
/// the range toward the server held. Each try is one UDP frame from a fresh client
/// port; its mapping (both entries) is removed after it, so the occupancy stays put.
fn alloc_at_90pct(node: &mut Node, tries: u32) -> f64 {
    let be = |a: [u8; 4]| u32::from_ne_bytes(a);
    let ct = &mut node.dataplane.conntrack;
    let (lo, hi) = (1024u32, 65535u32);
    let span = hi - lo + 1;
    let held = span * 9 / 10;
    // Every 10th port stays free: 90% held, spread over the range.
    let mut filled = 0;
    for p in lo..=hi {
        if filled == held {
            break;
        }
        if (p - lo) % 10 == 9 {
            continue;
        }
        let key = CtKey::new(
            ZONE_HOST,
            be(OUTSIDE),
            be(NAT_IP),
            DPORT.to_be(),
            (p as u16).to_be(),
            17,
        );
        let claim = CtEntry {
            flags: CT_F_REPLY | CT_F_NAT,
            last_seen_ns: juneau::node::dataplane::monotonic_coarse_ns(),
            ..Default::default()
        };
        ct.insert(&key, &claim).expect("a claim");
        filled += 1;
    }
    // Each try's own port is one of the held ones: every try goes to the random draws.
    let injector = juneau_harness::capture::Injector::open(&node.pods[0].ns, "eth0");
    let drops_before = node.dataplane.drops().unwrap()["NAT_PORT_EXHAUSTED"];
    let mut got = 0u32;
    for i in 0..tries {
        let k = i % (held / 9 * 9 / 10);
        let sport = (lo + (k / 9) * 10 + k % 9) as u16;
        let frame = frames::udp_ports((pod_mac(0), POD, sport), (GW_MAC, OUTSIDE, DPORT), &[0; 22]);
        injector.send(&frame);
        let original = CtKey::new(VNI, be(POD), be(OUTSIDE), sport.to_be(), DPORT.to_be(), 17);
        // The frame is taken in by the veth's backlog: wait until it is judged (a
        // refusal writes nothing; its count is read once at the end).
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(20);
        while std::time::Instant::now() < deadline {
            let ct = &mut node.dataplane.conntrack;
            if let Ok(Some(e)) = ct.get(&original) {
                got += 1;
                ct.remove(&original).unwrap();
                let claim = CtKey::new(
                    ZONE_HOST,
                    be(OUTSIDE),
                    e.nat_ip,
                    DPORT.to_be(),
                    e.nat_port,
                    17,
                );
                ct.remove(&claim).unwrap();
                break;
            }
            std::thread::yield_now();
        }
    }
    let refused = node.dataplane.drops().unwrap()["NAT_PORT_EXHAUSTED"] - drops_before;
    assert_eq!(
        u64::from(tries - got),
        refused,
        "every try either got a port or was counted as refused"
    );
    f64::from(got) / f64::from(tries)
}

/// The Pod's address and default route via the segment's gateway (the Pod namespaces
/// of both beds are bare).
fn address_pod(pod: &Netns) {
    ip(pod, "addr add 10.0.1.10/24 dev eth0");
    ip(pod, "route add default via 10.0.1.1");
}

/// The server of the connection-rate rounds: 198.51.100.10 on the upstream's loopback,
/// accepting and dropping every connection until `stop`.
fn crr_server(
    up: &Netns,
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    ip(up, "link set lo up");
    ip(up, "addr add 198.51.100.10/32 dev lo");
    crr::server(up.path(), Ipv4Addr::new(198, 51, 100, 10), port, stop)
}

/// Connections a second from `pod` to the server for `secs`: connect, then reset; and
/// how many connections failed (timed out).
fn crr(pod: &Netns, port: u16, secs: f64) -> (f64, u64) {
    let to: std::net::SocketAddr = format!("198.51.100.10:{port}").parse().unwrap();
    let r = crr::client(pod.path(), &[to], secs);
    (r.per_s, r.failed)
}

fn main() {
    let quick = std::env::var_os("JUNEAU_BENCH_QUICK").is_some();
    let (count, rounds): (u32, usize) = if quick { (200_000, 3) } else { (1_000_000, 7) };
    let mut generator = LiveFrames::load();
    let (mut node, upstream) = juneau_node();
    let (k_node, k_pod, k_upstream, h0) = masquerade_bed();
    let (c_node, c_pod, c_upstream) = ceiling_bed();
    if let Ok(n) = std::env::var("JN_NAT_ALLOC_ONLY") {
        let t0 = std::time::Instant::now();
        let a = alloc_at_90pct(&mut node, n.parse().unwrap());
        println!("alloc: {a} in {:?}", t0.elapsed());
        return;
    }
    // New connections first, before the sinks drop what reaches the upstreams.
    node.dataplane
        .set_arp_answers(&BTreeMap::from([(
            Ipv4Addr::from(NAT_IP),
            uplink::UPLINK_MAC,
        )]))
        .unwrap();
    address_pod(&node.pods[0].ns);
    address_pod(&k_pod);
    // The ceiling bed's bare redirects, both ways, for the rounds of both kinds.
    let mut floor = aya::EbpfLoader::new()
        .load(juneau::baseline::FLOOR_OBJECT)
        .expect("load the floor object");
    let (pod_side, up_side) = c_node.run(|| (if_index("h0"), if_index("ul0")));
    let mut fwd =
        aya::maps::HashMap::<_, u32, u32>::try_from(floor.map_mut("jn_floor_fwd").unwrap())
            .unwrap();
    fwd.insert(pod_side, up_side, 0).unwrap();
    fwd.insert(up_side, pod_side, 0).unwrap();
    for dev in ["h0", "ul0"] {
        attach(&mut floor, "floor_redirect", &c_node, dev);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    const CRR_PORT: u16 = 7000;
    let servers = [
        crr_server(&upstream, CRR_PORT, stop.clone()),
        crr_server(&k_upstream, CRR_PORT, stop.clone()),
        crr_server(&c_upstream, CRR_PORT, stop.clone()),
    ];
    let secs = if quick { 1.0 } else { 2.0 };
    let crr_beds = [&node.pods[0].ns, &k_pod, &c_pod];
    let mut crr_rates: [Vec<f64>; 3] = Default::default();
    let mut crr_failed = [0u64; 3];
    for round in 0..rounds {
        for i in (0..crr_beds.len()).map(|j| (j + round) % crr_beds.len()) {
            let (r, f) = crr(crr_beds[i], CRR_PORT, secs);
            crr_rates[i].push(r);
            crr_failed[i] += f;
        }
    }
    let [(mut cj, fj), (mut ck, fk), (mut cc, fc)] =
        [0, 1, 2].map(|i| (std::mem::take(&mut crr_rates[i]), crr_failed[i]));
    println!("crr: failed connections juneau {fj}, masquerade {fk}, bare redirect {fc}");
    if std::env::var_os("JN_NAT_CRR_ONLY").is_some() {
        let d = node.dropped();
        println!("crr: {cj:?} {ck:?} {cc:?} drops {d:?}");
        return;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in servers {
        s.join().unwrap();
    }
    let (crr_j, crr_k, crr_c) = (median(&mut cj), median(&mut ck), median(&mut cc));
    let crr_drops = node.dropped();
    assert!(crr_drops.is_empty(), "the datapath dropped: {crr_drops:?}");
    for ns in [&upstream, &k_upstream, &c_upstream] {
        attach(&mut floor, "floor_drop", ns, "eth0");
    }
    let pad = [0u8; 22];
    let src = (pod_mac(0), POD, SPORT);
    let out_j = frames::udp_ports(src, (GW_MAC, OUTSIDE, DPORT), &pad);
    let out_k = frames::udp_ports(src, (h0, OUTSIDE, DPORT), &pad);
    let out_c = frames::udp_ports(src, (ROUTER_MAC, OUTSIDE, DPORT), &pad);
    // The connection is opened (translated once) on both beds before the rounds.
    inject(&node.pods[0].ns, "eth0", &out_j);
    inject(&k_pod, "eth0", &out_k);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let masq_before = masqueraded(&k_node);
    let paths: [(&str, &Netns, &Netns, &[u8]); 3] = [
        ("juneau natGateway", &node.pods[0].ns, &upstream, &out_j),
        ("nftables masquerade", &k_pod, &k_upstream, &out_k),
        ("bare bpf_redirect", &c_pod, &c_upstream, &out_c),
    ];
    // `JN_NAT_PROFILE=<path index>:<seconds>`: only that path, for a profiler to watch.
    if let Some((i, secs)) = std::env::var("JN_NAT_PROFILE").ok().and_then(|v| {
        Some((
            v.split(':').next()?.parse::<usize>().ok()?,
            v.split(':').nth(1)?.parse::<u64>().ok()?,
        ))
    }) {
        let (name, tx, rx, frame) = paths[i];
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            let r = generator.blast_fresh(tx, "eth0", rx, frame, count);
            println!("{name}: {r:.3} Mpps");
        }
        return;
    }
    let mut r: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        for i in (0..paths.len()).map(|j| (j + round) % paths.len()) {
            let (_, tx, rx, frame) = paths[i];
            r[i].push(generator.blast_fresh(tx, "eth0", rx, frame, count));
        }
    }
    let m = r.map(|mut v| median(&mut v));
    // Each bed translated once: the masquerade rule saw no measured frame (conntrack
    // took them), Juneau's datapath dropped none.
    assert_eq!(
        masqueraded(&k_node),
        masq_before,
        "the masquerade rule ran again during the rounds"
    );
    let drops = node.dropped();
    assert!(drops.is_empty(), "the datapath dropped frames: {drops:?}");
    let tries = if quick { 10_000 } else { 100_000 };
    let alloc = alloc_at_90pct(&mut node, tries);
    let insns = node
        .dataplane
        .program("nat_out")
        .info()
        .ok()
        .and_then(|i| i.verified_instruction_count())
        .unwrap_or(0) as f64;
    println!(
        "nat pps, median of {rounds} rotated rounds of {count}: juneau {:.2} Mpps, masquerade {:.2}, bare redirect {:.2}; port alloc at 90%: {alloc:.5} of {tries}; crr juneau {crr_j:.0}/s, masquerade {crr_k:.0}/s, bare redirect {crr_c:.0}/s",
        m[0], m[1], m[2]
    );
    let how = format!(
        "64-byte IPv4/UDP frames of one connection written afresh by an XDP live-frames generator in the sender Pod (one CPU), counted at the upstream router's eth0 rx and dropped there; median of {rounds} rounds of {count}, the paths interleaved"
    );
    write_part(
        "nat",
        &[
            Measurement::new(
                "pps_natgw_vs_masquerade",
                "Mpps",
                m[0],
                ("nftables_masquerade_conntrack", m[1]),
                &format!(
                    "goal >= 1.5x; a Subnet Pod to 198.51.100.10 (a routed port whose veth runs gw_route itself) through its Vpc's 0.0.0.0/0 via natGateway: the first packet gw_route -> gw_forward -> nat_out (FIB, the connection's mapping in the connection table, source rewritten to the Node's 10.99.0.100), the rest by gw_route's fast path (the connection's entry, its cached hop), bpf_redirect out of the uplink; baseline: a plain veth Pod, the Node namespace's kernel forwarding and masquerading (ip_forward, nftables masquerade on the uplink, conntrack; the rule ran for the first frame only, checked) out of the same kind of uplink; {how}"
                ),
            ),
            Measurement::new(
                "pps_natgw_vs_bare_redirect",
                "Mpps",
                m[0],
                ("bare_bpf_redirect", m[2]),
                &format!(
                    "the ceiling of the same path here: one bpf_redirect by ingress ifindex from a plain Pod's veth to the uplink (floor_redirect), nothing looked up or rewritten; that ceiling is {:.2}x the masquerade baseline; {how}",
                    m[2] / m[1]
                ),
            ),
            Measurement::new(
                "nat_port_alloc_at_90pct",
                "fraction",
                alloc,
                ("goal", 0.9999),
                &format!(
                    "goal >= 0.9999; {tries} new UDP connections from one Pod to one server port, each through the datapath (the client's own port held, then up to 128 random tries under bpf_loop), with 90% of the Node address's ports 1024-65535 toward that server held by claims in the connection table (every tenth free); each try's mapping is removed after it, so every try meets 90%; analytically 1 - 0.9^128 = 0.9999986"
                ),
            ),
            Measurement::new(
                "tcp_crr_natgw_vs_masquerade",
                "conn/s",
                crr_j,
                ("nftables_masquerade_conntrack", crr_k),
                &format!(
                    "goal >= 1.5x; new TCP connections a second from the Pod to 198.51.100.10:{CRR_PORT} (a listener on the upstream router's loopback that accepts and drops), each connected then reset (SO_LINGER 0: no TIME_WAIT), one client thread; Juneau: each connection a new mapping through nat_out, its replies back through eip_uplink; baseline: the same Pod shape behind the Node kernel's forwarding and nftables masquerade with conntrack; median of {rounds} rounds of {secs} s, alternating which bed goes first; connections that timed out (1 s, the bed's listen queue; counted, not in the rate): Juneau {fj}, masquerade {fk}"
                ),
            ),
            Measurement::new(
                "tcp_crr_natgw_vs_bare_redirect",
                "conn/s",
                crr_j,
                ("bare_bpf_redirect", crr_c),
                &format!(
                    "the ceiling of the connection rate here: the same client, server and rounds through a plain Pod whose veth and uplink forward to each other by one bare bpf_redirect (floor_redirect both ways, no translation, the server routing back to the Pod); that ceiling is {:.2}x the masquerade baseline; connections that timed out: {fc}",
                    crr_c / crr_k
                ),
            ),
            Measurement::new(
                "verifier_nat_out",
                "insns",
                insns,
                ("kernel_limit_goal", 150_000.0),
                "goal < 150,000; the NATGateway's way out entered by tail call from gw_forward (FIB, the claim loop under bpf_loop verified once, translation, ICMP refusal)",
            ),
        ],
    );
    drop(floor);
}
