//! BPF_PROG_TEST_RUN tests of the Node's door into the default Subnet (`gw::node`): a
//! default-Subnet Pod's answers to its Node's address, and its ARP replies to the
//! Node's questions, go to the Node's stack (TC_ACT_OK, unchanged); the same from a
//! Subnet of another Vpc are routed as anything else (no route: that Vpc may reuse the
//! Node's range, and the Node has no route into it). Node 10.99.0.1; Subnet S
//! (10.0.3.0/24), routed port 0.
use std::net::Ipv4Addr;

use juneau::node::dataplane::{PortKind, PortSpec};
use juneau_harness::{
    frames::{self, fixtures::*},
    router::{self, RouterBed, Seg},
    testrun::{PortBed, TC_ACT_SHOT},
};

const TC_ACT_OK: u32 = 0;
const VNI_S: u32 = 12;
const GW_S: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 12];
const SEG_S: Seg = Seg {
    vni: VNI_S,
    cidr: "10.0.3.0/24",
    gw: [10, 0, 3, 1],
    gw_mac: GW_S,
    mtu: 1500,
};
const POD: [u8; 4] = [10, 0, 3, 10];
const NODE: [u8; 4] = [10, 99, 0, 1];
/// The host veth's MAC, which the Node's ARP request came from.
const HOST: [u8; 6] = [0x02, 0, 0, 0, 0x77, 0x77];

/// The Subnet in the default Vpc (`provider`) or in another.
fn bed(provider: bool) -> RouterBed {
    let bed = PortBed::new(1);
    let mut dp = bed.bring_up_node();
    let mut state = router::state(&[SEG_S], &[(VNI_S, POD, pod_mac(0), NODE.into())]);
    state.segments.get_mut(&VNI_S).unwrap().provider = provider;
    dp.sync_router(&state).unwrap();
    dp.configure_port(PortSpec {
        ifindex: bed.ifindex(0),
        vni: VNI_S,
        mtu: 0,
        peer: true,
        security_groups: false,
        kind: PortKind::Subnet {
            mac: pod_mac(0),
            ip: Ipv4Addr::from(POD),
        },
    })
    .unwrap();
    RouterBed { bed, dp }
}

#[test]
fn l2_27_only_a_default_subnet_pod_answers_its_node_through_the_door() {
    let answer = frames::udp((pod_mac(0), POD), (GW_S, NODE), b"probe answer");
    let arp = frames::arp_reply(pod_mac(0), POD, HOST, NODE);
    let b = bed(true);
    let run = b.send(0, &answer);
    assert_eq!(
        (run.verdict, &run.data),
        (TC_ACT_OK, &answer),
        "{:?}",
        b.drops()
    );
    let run = b.send(0, &arp);
    assert_eq!(
        (run.verdict, &run.data),
        (TC_ACT_OK, &arp),
        "{:?}",
        b.drops()
    );
    assert!(b.drops().is_empty(), "{:?}", b.drops());

    // Another Vpc's Pod: no route (answered with ICMP unreachable, back into the
    // port), never the Node's stack.
    let b = bed(false);
    let run = b.send(0, &answer);
    assert_ne!(run.verdict, TC_ACT_OK, "another Vpc's Pod reached the Node");
    assert_eq!(&run.data[30..34], &POD, "an ICMP error back to the Pod");
    assert_eq!(run.data[23], 1, "ICMP");
    assert_eq!(b.send(0, &arp).verdict, TC_ACT_SHOT);
    let drops = b.drops();
    assert_eq!(
        (drops.get("NO_ROUTE"), drops.get("NOT_FOR_ROUTER")),
        (Some(&1), Some(&1)),
        "{drops:?}"
    );
}
