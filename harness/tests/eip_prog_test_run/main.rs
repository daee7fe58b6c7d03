//! BPF_PROG_TEST_RUN tests of direct ElasticIP NICs: the port's program (`eip_port`,
//! entered from `port_ingress`) and the uplink's (`eip_uplink`, entered from
//! `underlay_ingress`). Ports 0 and 1 hold 10.99.0.100 and .101 (network 4097) on this
//! Node (VTEP 10.99.0.1); .102 is held on the Node 10.99.0.2; this Node answers ARP
//! for .100.
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::node::dataplane::{Holder, PortKind, PortSpec, Whole};
use juneau_common::eip::gateway_mac;
use juneau_harness::{
    frames::{self, BROADCAST, fixtures::*, ones_complement},
    testrun::{PortBed, TC_ACT_REDIRECT, TC_ACT_SHOT, run_tc_on_dev},
};

const VNI: u32 = 4097;
const TC_ACT_OK: u32 = 0;
const GW: [u8; 4] = [169, 254, 0, 1];
const UPLINK_MAC: [u8; 6] = [0x02, 0, 0, 0x99, 0, 1];
const ROUTER: ([u8; 6], [u8; 4]) = ([0x02, 0, 0, 0x99, 0, 0xfe], [10, 99, 0, 254]);
const OUTSIDE: [u8; 4] = [198, 51, 100, 10];

const fn eip(i: u8) -> [u8; 4] {
    [10, 99, 0, 100 + i]
}

struct Bed {
    bed: PortBed,
    dp: Whole,
}

fn bed() -> Bed {
    let bed = PortBed::new(2);
    // The uplink runs use port 0's interface: it takes frames to its own MAC only.
    bed.ns
        .ip(&["link", "set", "h0", "address", "02:00:00:99:00:01"]);
    let mut dp = bed.bring_up_node();
    // The Node's way out: a default route via the upstream router, whose MAC it knows,
    // and forwarding on.
    bed.ns.ip(&[
        "route",
        "add",
        "default",
        "via",
        "10.99.0.254",
        "dev",
        "ul0",
    ]);
    bed.ns.ip(&[
        "neigh",
        "add",
        "10.99.0.254",
        "lladdr",
        "02:00:00:99:00:fe",
        "dev",
        "ul0",
    ]);
    bed.ns.run(|| {
        std::fs::write("/proc/sys/net/ipv4/conf/all/forwarding", "1").unwrap();
        for i in 0..2 {
            std::fs::write(format!("/proc/sys/net/ipv4/conf/h{i}/forwarding"), "1").unwrap();
        }
    });
    for i in 0..2u8 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i as usize),
            vni: VNI,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::ElasticIp {
                mac: pod_mac(i),
                ip: eip(i).into(),
            },
        })
        .unwrap();
    }
    let holders: BTreeMap<Ipv4Addr, Holder> = [
        (eip(0), pod_mac(0), [10, 99, 0, 1]),
        (eip(1), pod_mac(1), [10, 99, 0, 1]),
        (eip(2), pod_mac(7), [10, 99, 0, 2]),
    ]
    .into_iter()
    .map(|(ip, mac, node)| {
        (
            ip.into(),
            Holder {
                mac,
                vni: VNI,
                node: node.into(),
                pod_ip: None,
            },
        )
    })
    .collect();
    dp.set_elastic_ips(&holders).unwrap();
    dp.set_arp_answers(&BTreeMap::from([(eip(0).into(), UPLINK_MAC)]))
        .unwrap();
    Bed { bed, dp }
}

impl Bed {
    fn port(&self, i: usize, frame: &[u8]) -> juneau_harness::testrun::Run {
        self.bed.send(self.dp.l2_port_program(), i, frame)
    }

    fn uplink(&self, frame: &[u8]) -> juneau_harness::testrun::Run {
        let prog = self.dp.program("underlay_ingress");
        run_tc_on_dev(&self.bed.ns, prog, self.bed.ifindex(0), frame)
    }

    fn drops(&self) -> BTreeMap<&'static str, u64> {
        self.dp
            .drops()
            .unwrap()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// A ping from the holder of .102 (on the Node 10.99.0.2) to .100, as that Node's
/// datapath carries it: VXLAN to this Node with VNI = networkID.
fn overlay_ping_to_port0() -> Vec<u8> {
    frames::vxlan(
        ([0x02, 0, 0, 0x99, 0, 2], UPLINK_MAC),
        [10, 99, 0, 2],
        [10, 99, 0, 1],
        VNI,
        &frames::icmp_echo(pod(7), (pod_mac(0), eip(0)), 63, 8, false),
    )
}

fn pod(i: u8) -> ([u8; 6], [u8; 4]) {
    (pod_mac(i), eip(i))
}

#[test]
fn eip_08_arp_for_169_254_0_1_is_answered_in_place_with_the_gateway_mac() {
    let b = bed();
    let run = b.port(0, &frames::arp_request(pod_mac(0), eip(0), GW));
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(
        run.data,
        frames::arp_reply(gateway_mac(VNI), GW, pod_mac(0), eip(0))
    );
    // A duplicate-address probe (no sender address) too.
    let run = b.port(0, &frames::arp_request(pod_mac(0), [0; 4], GW));
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    assert!(b.drops().is_empty(), "{:?}", b.drops());
}

#[test]
fn eip_16_a_direct_nic_speaks_ipv4_from_its_address_and_two_kinds_of_arp_only() {
    let b = bed();
    // A reply about its own address goes to the Node's stack (which asked).
    let reply = frames::arp_reply(pod_mac(0), eip(0), UPLINK_MAC, [10, 99, 0, 1]);
    let run = b.port(0, &reply);
    assert_eq!(run.verdict, TC_ACT_OK);
    assert_eq!(run.data, reply, "untouched");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "ARP for another address",
            frames::arp_request(pod_mac(0), eip(0), [10, 99, 0, 1]),
            "ARP_FILTERED",
        ),
        (
            "a reply about another address",
            frames::arp_reply(pod_mac(0), eip(1), BROADCAST, eip(1)),
            "ARP_FILTERED",
        ),
        (
            "ARP from another MAC",
            frames::arp_request(pod_mac(1), eip(0), GW),
            "SOURCE_GUARD",
        ),
        (
            "IPv4 from another address",
            frames::icmp_echo(
                (pod_mac(0), eip(1)),
                (gateway_mac(VNI), OUTSIDE),
                64,
                8,
                false,
            ),
            "SOURCE_GUARD",
        ),
        (
            "IPv4 from another MAC",
            frames::icmp_echo(
                (pod_mac(1), eip(0)),
                (gateway_mac(VNI), OUTSIDE),
                64,
                8,
                false,
            ),
            "SOURCE_GUARD",
        ),
        (
            "IPv6",
            frames::ipv6_ns(pod_mac(0), pod_ip6(0), pod_ip6(1)),
            "EIP_NOT_IPV4",
        ),
        (
            "a ping to 169.254.0.1 (no host)",
            frames::icmp_echo(pod(0), (gateway_mac(VNI), GW), 64, 8, false),
            "NOT_ROUTABLE",
        ),
        (
            "broadcast",
            frames::icmp_echo(pod(0), (BROADCAST, [255, 255, 255, 255]), 64, 8, false),
            "NOT_ROUTABLE",
        ),
        (
            "multicast",
            frames::icmp_echo(
                pod(0),
                ([0x01, 0, 0x5e, 0, 0, 0xfb], [224, 0, 0, 251]),
                64,
                8,
                false,
            ),
            "NOT_ROUTABLE",
        ),
        (
            "unicast IPv4 in a broadcast frame",
            frames::icmp_echo(pod(0), (BROADCAST, OUTSIDE), 64, 8, false),
            "NOT_ROUTABLE",
        ),
        (
            "another EtherType",
            frames::raw(BROADCAST, pod_mac(0), 0x88b5, b"pure l2"),
            "EIP_NOT_IPV4",
        ),
    ];
    for (what, frame, reason) in &cases {
        let before = b.drops().get(reason).copied().unwrap_or(0);
        assert_eq!(b.port(0, frame).verdict, TC_ACT_SHOT, "{what}");
        assert_eq!(b.drops()[reason], before + 1, "{what}: {:?}", b.drops());
    }
    assert_eq!(b.bed.tx(1), 0, "nothing reached the other NIC");
}

#[test]
fn eip_09_eip_13_eip_14_another_elastic_ip_is_turned_around_anything_else_goes_to_the_node() {
    let b = bed();
    // To the ElasticIP of the NIC next door: one hop, its MAC, the gateway's as source.
    let req = frames::icmp_echo(pod(0), (gateway_mac(VNI), eip(1)), 64, 56, false);
    let run = b.port(0, &req);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!(
        (&r[0..6], &r[6..12]),
        (&pod_mac(1)[..], &gateway_mac(VNI)[..])
    );
    assert_eq!(r[22], 63, "TTL - 1");
    assert_eq!(
        (&r[26..30], &r[30..34]),
        (&eip(0)[..], &eip(1)[..]),
        "no NAT"
    );
    assert_eq!(ones_complement(&r[14..34]), 0);
    // To one held on another Node: carried with VNI = networkID to that Node.
    let run = b.port(
        0,
        &frames::icmp_echo(pod(0), (gateway_mac(VNI), eip(2)), 64, 56, false),
    );
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!(
        &r[30..34],
        &[10, 99, 0, 2],
        "outer destination: the holder's Node"
    );
    assert_eq!(
        u32::from_be_bytes([0, r[46], r[47], r[48]]),
        VNI,
        "VNI = networkID"
    );
    assert_eq!(
        &r[50..56],
        &pod_mac(7),
        "inner destination: the holder's MAC"
    );
    assert_eq!(r[50 + 22], 63);
    // Anywhere else: by the Node's routing table, to its next hop, source kept (EIP-09).
    let out = frames::icmp_echo(pod(0), (gateway_mac(VNI), OUTSIDE), 64, 56, false);
    let run = b.port(0, &out);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!(&r[0..6], &ROUTER.0, "to the upstream router");
    assert_eq!(
        (&r[26..30], &r[30..34]),
        (&eip(0)[..], &OUTSIDE[..]),
        "no NAT"
    );
    assert_eq!(r[22], 63, "one hop");
    assert_eq!(ones_complement(&r[14..34]), 0);
    // The Node's own address: its stack's.
    let own = frames::icmp_echo(pod(0), (gateway_mac(VNI), [10, 99, 0, 1]), 64, 56, false);
    let run = b.port(0, &own);
    assert_eq!((run.verdict, run.data), (TC_ACT_OK, own));
    assert!(b.drops().is_empty(), "{:?}", b.drops());
}

#[test]
fn eip_11_the_uplink_answers_arp_only_for_what_this_node_advertises() {
    let b = bed();
    let run = b.uplink(&frames::arp_request(ROUTER.0, ROUTER.1, eip(0)));
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    assert_eq!(
        run.data,
        frames::arp_reply(UPLINK_MAC, eip(0), ROUTER.0, ROUTER.1)
    );
    // Held here but advertised by no one here, held elsewhere, or the Node's own: the
    // stack's (which answers only for its own addresses).
    for target in [eip(1), eip(2), [10, 99, 0, 1]] {
        let req = frames::arp_request(ROUTER.0, ROUTER.1, target);
        let run = b.uplink(&req);
        assert_eq!(run.verdict, TC_ACT_OK, "{target:?}");
        assert_eq!(run.data, req);
    }
    // Another Node announcing .100 (a gratuitous request) is not answered.
    let announced = frames::arp_request([0x02, 0, 0, 0x99, 0, 2], eip(0), eip(0));
    let run = b.uplink(&announced);
    assert_eq!((run.verdict, run.data), (TC_ACT_OK, announced));
}

/// `frame` (IPv4 without options) with a 4-byte option (four NOPs) after its header:
/// IHL 6, the lengths and the header checksum rewritten.
fn with_ip_options(frame: &[u8]) -> Vec<u8> {
    let mut f = frame[..34].to_vec();
    f.extend_from_slice(&[1, 1, 1, 1]);
    f.extend_from_slice(&frame[34..]);
    f[14] = 0x46;
    let tot = u16::from_be_bytes([f[16], f[17]]) + 4;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let sum = ones_complement(&f[14..38]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

mod uplink;
