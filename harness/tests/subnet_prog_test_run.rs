//! BPF_PROG_TEST_RUN tests of Subnet NICs (routed ports): ARP answered for the gateway
//! and the Subnet's peers with their real MACs, IPv4 delivered within the Subnet
//! without a hop and routed to the rest of the Vpc with one, and the source guard.
//! Subnet S (10.0.3.0/24) has routed ports 0 and 1; the gateway segment L
//! (10.0.1.0/24) has the switched port 2. Every Pod is seeded as a neighbour here.
//! Routes via endpoints lead to the Pod on L and to the Subnet Pod on port 1.
use std::net::Ipv4Addr;

use juneau::features::router::gateway::RouteSpec;
use juneau::node::dataplane::{PortKind, PortSpec, Whole};
use juneau_common::{
    gw::{ROUTE_ENDPOINT, ROUTE_NO_NEXT_HOP},
    port::PORT_ROUTED,
};
use juneau_harness::{
    frames::{self, BROADCAST, fixtures::*, ones_complement},
    router::{self, RouterBed, Seg},
    testrun::{PortBed, TC_ACT_REDIRECT, TC_ACT_SHOT, run_tc},
};

const VNI_S: u32 = 12;
const VNI_L: u32 = 10;
const GW_S: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 12];
const GW_L: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 10];
const GW_S_IP: [u8; 4] = [10, 0, 3, 1];
const GW_L_IP: [u8; 4] = [10, 0, 1, 1];
const SEG_S: Seg = Seg {
    vni: VNI_S,
    cidr: "10.0.3.0/24",
    gw: GW_S_IP,
    gw_mac: GW_S,
    mtu: 1500,
};
const SEG_L: Seg = Seg {
    vni: VNI_L,
    cidr: "10.0.1.0/24",
    gw: GW_L_IP,
    gw_mac: GW_L,
    mtu: 1450,
};

/// The address of the Subnet Pod on port `i` (0 or 1).
const fn s_ip(i: u8) -> [u8; 4] {
    [10, 0, 3, 10 + i]
}

/// The Pod on port `i`: its MAC and address.
fn pod(i: u8) -> ([u8; 6], [u8; 4]) {
    (pod_mac(i), if i < 2 { s_ip(i) } else { pod_ip(i) })
}

fn new_bed() -> RouterBed {
    let bed = PortBed::new(3);
    let mut dp = Whole::load(None).expect("load");
    let here = Ipv4Addr::UNSPECIFIED;
    let mut state = router::state(
        &[SEG_S, SEG_L],
        &[
            (VNI_S, s_ip(0), pod_mac(0), here),
            (VNI_S, s_ip(1), pod_mac(1), here),
            (VNI_L, pod_ip(2), pod_mac(2), here),
        ],
    );
    // Routes via endpoints: the Pod on L (a router Pod), the Subnet peer on port 1,
    // and one whose endpoint does not exist.
    let table = state.tables.get_mut("t").unwrap();
    for (dst, seg, nh, kind) in [
        ("192.168.50.0/24", SEG_L, pod_ip(2), ROUTE_ENDPOINT),
        ("192.168.51.0/24", SEG_S, s_ip(1), ROUTE_ENDPOINT),
        ("192.168.60.0/24", SEG_L, [0; 4], ROUTE_NO_NEXT_HOP),
    ] {
        table.insert(RouteSpec {
            dst: dst.parse().unwrap(),
            kind,
            nh_ip: nh.into(),
            ..seg.connected()
        });
    }
    dp.sync_router(&state).unwrap();
    for i in 0..3u8 {
        let kind = if i < 2 {
            PortKind::Subnet {
                mac: pod_mac(i),
                ip: s_ip(i).into(),
            }
        } else {
            PortKind::Switched
        };
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i as usize),
            vni: if i < 2 { VNI_S } else { VNI_L },
            mtu: 0,
            peer: true,
            security_groups: false,
            kind,
        })
        .unwrap();
    }
    RouterBed { bed, dp }
}

fn assert_checksums(f: &[u8]) {
    assert_eq!(ones_complement(&f[14..34]), 0, "IPv4 header checksum");
}

#[test]
fn l2_15_subnet_arp_is_answered_for_the_gateway_and_peers_with_real_macs_and_never_flooded() {
    let b = new_bed();
    let (mac0, ip0) = pod(0);
    let run = b.send(0, &frames::arp_request(mac0, ip0, GW_S_IP));
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(run.data, frames::arp_reply(GW_S, GW_S_IP, mac0, ip0));
    // A peer of the Subnet, silent so far: its own MAC, from the seed.
    let run = b.send(0, &frames::arp_request(mac0, ip0, s_ip(1)));
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(run.data, frames::arp_reply(pod_mac(1), s_ip(1), mac0, ip0));
    // A unicast probe (Linux NUD) to the peer's MAC is answered the same way.
    let mut probe = frames::arp_request(mac0, ip0, s_ip(1));
    probe[..6].copy_from_slice(&pod_mac(1));
    assert_eq!(b.send(0, &probe).verdict, TC_ACT_REDIRECT);
    assert_eq!(b.stat("ARP_REPLIES"), 3);
    // Nobody Juneau did not hand out, nor the asker itself.
    let before = b.bed.tx(1);
    for target in [[10, 0, 3, 99], ip0, pod_ip(2)] {
        let run = b.send(0, &frames::arp_request(mac0, ip0, target));
        assert_eq!(run.verdict, TC_ACT_SHOT, "{target:?}");
    }
    assert_eq!(b.drops()["NO_NEIGHBOUR"], 3);
    assert_eq!(b.bed.tx(1), before, "no ARP ever leaves a Subnet port");
}

#[test]
fn l2_15_within_a_subnet_delivered_without_a_hop_across_the_vpc_routed_with_one() {
    let b = new_bed();
    // Pod 0 to its Subnet peer (silent so far): the frame arrives as sent, TTL and
    // MACs untouched, even with TTL 1.
    for ttl in [64, 1] {
        let req = frames::icmp_echo(pod(0), pod(1), ttl, 56, false);
        let run = b.send(0, &req);
        assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
        assert_eq!(run.data, req, "TTL {ttl}: delivered unchanged");
    }
    // To the gateway segment L: one hop.
    let req = frames::icmp_echo(pod(0), (GW_S, pod_ip(2)), 64, 56, false);
    let run = b.send(0, &req);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!((&r[0..6], &r[6..12]), (&pod_mac(2)[..], &GW_L[..]));
    assert_eq!(r[22], 63, "TTL decremented once");
    assert_checksums(r);
    // From L to the Subnet Pod, which never spoke: found by its port's own entry.
    let req = frames::icmp_echo(pod(2), (GW_L, s_ip(0)), 64, 56, false);
    let run = b.send(2, &req);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!((&r[0..6], &r[6..12]), (&pod_mac(0)[..], &GW_S[..]));
    assert_eq!(r[22], 63);
    assert_checksums(r);
    assert_eq!(b.bed.tx(1), 0, "nothing flooded to the other Subnet port");
    assert_eq!(b.stat("ROUTED"), 4);
    assert!(b.drops().is_empty(), "{:?}", b.drops());
    // The ping to the Subnet's gateway is answered.
    let run = b.send(0, &frames::icmp_echo(pod(0), (GW_S, GW_S_IP), 64, 8, false));
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    assert_eq!(&run.data[26..30], &GW_S_IP, "from the gateway");
}

#[test]
fn l2_15_a_subnet_port_speaks_ipv4_and_arp_from_its_own_mac_and_address_only() {
    let b = new_bed();
    let (mac0, ip0) = pod(0);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "another Pod's address",
            frames::icmp_echo((mac0, s_ip(1)), (GW_S, pod_ip(2)), 64, 8, false),
            "SOURCE_GUARD",
        ),
        (
            "another Pod's MAC",
            frames::icmp_echo((pod_mac(1), ip0), (GW_S, pod_ip(2)), 64, 8, false),
            "SOURCE_GUARD",
        ),
        (
            "ARP claiming another address",
            frames::arp_request(mac0, s_ip(1), GW_S_IP),
            "SOURCE_GUARD",
        ),
        (
            "ARP whose sender MAC is not the Pod's",
            {
                let mut f = frames::arp_request(mac0, ip0, GW_S_IP);
                f[22..28].copy_from_slice(&pod_mac(1));
                f
            },
            "SOURCE_GUARD",
        ),
        (
            "a gratuitous reply",
            frames::arp_reply(mac0, ip0, BROADCAST, ip0),
            "NOT_FOR_ROUTER",
        ),
        (
            "a non-IP EtherType",
            frames::raw(pod_mac(1), mac0, 0x88b5, b"pure l2"),
            "NOT_IPV4_ON_SUBNET",
        ),
        (
            "IPv6",
            frames::ipv6_ns(mac0, pod_ip6(0), pod_ip6(1)),
            "NOT_IPV4_ON_SUBNET",
        ),
    ];
    for (what, frame, reason) in &cases {
        let before = b.drops().get(reason).copied().unwrap_or(0);
        assert_eq!(b.send(0, frame).verdict, TC_ACT_SHOT, "{what}");
        assert_eq!(b.drops()[reason], before + 1, "{what}: {:?}", b.drops());
    }
    assert_eq!(b.bed.tx(1), 0, "none of it reached the other port");
    // A DAD probe (no sender address) is answered: nothing else holds the address.
    let run = b.send(0, &frames::arp_request(mac0, [0; 4], GW_S_IP));
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    // Nothing was learned: the Subnet's table holds each port's own MAC, written with
    // the port, and no other.
    let mut fdb: Vec<([u8; 6], u32, bool)> =
        b.dp.fdb(VNI_S)
            .unwrap()
            .into_iter()
            .map(|(k, e)| (k.mac, e.ifindex, e.flags & PORT_ROUTED != 0))
            .collect();
    fdb.sort();
    assert_eq!(
        fdb,
        vec![
            (pod_mac(0), b.bed.ifindex(0), true),
            (pod_mac(1), b.bed.ifindex(1), true)
        ]
    );
}

#[test]
fn l2_15_a_routed_port_entry_never_ages_and_goes_with_its_port() {
    let mut b = new_bed();
    assert_eq!(b.dp.age(std::time::Duration::ZERO).unwrap(), 0);
    assert_eq!(b.dp.fdb(VNI_S).unwrap().len(), 2);
    b.dp.remove_port(b.bed.ifindex(1)).unwrap();
    let left: Vec<[u8; 6]> =
        b.dp.fdb(VNI_S)
            .unwrap()
            .iter()
            .map(|(k, _)| k.mac)
            .collect();
    assert_eq!(left, vec![pod_mac(0)]);
}

#[test]
fn l2_15_a_route_via_an_endpoint_sends_to_its_nic_with_one_hop() {
    let b = new_bed();
    let far = [192, 168, 50, 7];
    let req = frames::icmp_echo(pod(0), (GW_S, far), 64, 56, false);
    let run = b.send(0, &req);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!(&r[0..6], &pod_mac(2), "to the endpoint's MAC");
    assert_eq!(&r[6..12], &GW_L, "from its segment's gateway");
    assert_eq!(&r[30..34], &far, "the destination address is kept");
    assert_eq!(r[22], 63, "one hop");
    assert_checksums(r);
    // An endpoint in the sender's own Subnet is a hop too (a routing decision), not a
    // delivery within the Subnet.
    let req = frames::icmp_echo(pod(0), (GW_S, [192, 168, 51, 1]), 64, 8, false);
    let run = b.send(0, &req);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(
        (&run.data[0..6], &run.data[6..12]),
        (&pod_mac(1)[..], &GW_S[..])
    );
    assert_eq!(run.data[22], 63);
    // A route whose endpoint is not there drops under its name, and no shorter route
    // (none here) takes it.
    let req = frames::icmp_echo(pod(0), (GW_S, [192, 168, 60, 1]), 64, 8, false);
    assert_eq!(b.send(0, &req).verdict, TC_ACT_SHOT);
    assert_eq!(b.drops()["NO_NEXT_HOP"], 1);
    // The L2 Pod that is the router sends its replies back through its own gateway.
    let reply = frames::icmp_echo((pod_mac(2), far), (GW_L, s_ip(0)), 64, 8, false);
    let run = b.send(2, &reply);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(
        (&run.data[0..6], &run.data[6..12]),
        (&pod_mac(0)[..], &GW_S[..])
    );
}

#[test]
fn l2_15_a_gone_subnet_pod_is_not_flooded_to_its_neighbours() {
    let mut b = new_bed();
    // Pod 1 is gone from this Node but still seeded here (its endpoint not yet
    // deleted): a routed frame to it must not reach Pod 0 by a flood (a routed port
    // takes no flooded frame).
    b.dp.remove_port(b.bed.ifindex(1)).unwrap();
    let req = frames::icmp_echo(pod(2), (GW_L, s_ip(1)), 64, 56, false);
    assert_eq!(b.send(2, &req).verdict, TC_ACT_SHOT);
    assert_eq!(b.drops()["NO_NEIGHBOUR"], 1, "{:?}", b.drops());
    assert_eq!(b.bed.tx(0), 0, "nothing flooded to the other Subnet port");
}

#[test]
fn l2_15_an_overlay_frame_never_moves_a_routed_ports_entry() {
    let bed = PortBed::new(2);
    let mut dp = bed.bring_up_node();
    for i in 0..2u8 {
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
    let underlay = |inner: &[u8]| {
        let f = frames::vxlan(
            ([0x02, 0, 0, 0x99, 0, 2], [0x02, 0, 0, 0x99, 0, 1]),
            [10, 99, 0, 2],
            [10, 99, 0, 1],
            VNI_S,
            inner,
        );
        run_tc(
            &bed.ns,
            dp.program("underlay_ingress"),
            bed.ifindex(0),
            &f,
            1,
        )
    };
    // A remote frame claiming Pod 0's MAC is delivered by its destination's pinned
    // entry and teaches nothing: Pod 0's entry stays on its port.
    let claim = frames::udp(
        (pod_mac(0), [10, 0, 3, 77]),
        (pod_mac(1), s_ip(1)),
        &[0; 18],
    );
    assert_eq!(underlay(&claim).verdict, TC_ACT_REDIRECT);
    let entry = |mac: [u8; 6]| {
        dp.fdb(VNI_S)
            .unwrap()
            .into_iter()
            .find(|(k, _)| k.mac == mac)
            .map(|(_, e)| (e.ifindex, e.vtep, e.flags & PORT_ROUTED != 0))
    };
    assert_eq!(entry(pod_mac(0)), Some((bed.ifindex(0), 0, true)));
}
