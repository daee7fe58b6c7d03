//! IPv4 from outside and what the uplink refuses: the holder here or on its Node, Vpc
//! addresses out of reach, a stale port, TTL 1 and options, the encapsulation off
//! (EIP-01, EIP-09, EIP-12, EIP-15).
use super::*;

#[test]
fn eip_12_ipv4_from_outside_reaches_the_holder_here_or_on_its_node_with_one_hop() {
    let b = bed();
    let req = frames::icmp_echo((ROUTER.0, OUTSIDE), (UPLINK_MAC, eip(0)), 63, 56, false);
    let run = b.uplink(&req);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!(
        (&r[0..6], &r[6..12]),
        (&pod_mac(0)[..], &gateway_mac(VNI)[..])
    );
    assert_eq!(r[22], 62);
    assert_eq!(&r[26..30], &OUTSIDE, "the client's address, as sent");
    // Landed here, held elsewhere (a stale ARP cache): carried to the holder's Node.
    let run = b.uplink(&frames::icmp_echo(
        (ROUTER.0, OUTSIDE),
        (UPLINK_MAC, eip(2)),
        63,
        56,
        false,
    ));
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(&run.data[30..34], &[10, 99, 0, 2]);
    assert_eq!(run.data[50 + 22], 62, "one hop in all");
    // A frame for another host that the wire flooded here: not ours to deliver.
    let flooded = frames::icmp_echo(
        (ROUTER.0, OUTSIDE),
        ([0x02, 9, 9, 9, 9, 9], eip(0)),
        63,
        8,
        false,
    );
    let run = b.uplink(&flooded);
    assert_eq!((run.verdict, run.data), (TC_ACT_OK, flooded));
    // UDP to port 4789 of an ElasticIP (a VM that is a VTEP itself) is its, not the
    // overlay's.
    let vtep_vm = frames::vxlan(
        (ROUTER.0, UPLINK_MAC),
        [198, 51, 100, 10],
        eip(0),
        77,
        &frames::raw(BROADCAST, [0x02, 7, 7, 7, 7, 7], 0x88b5, b"inner"),
    );
    let run = b.uplink(&vtep_vm);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(&run.data[0..6], &pod_mac(0), "to the ElasticIP's holder");
    // Not an ElasticIP, or a VXLAN frame: the stack's and the overlay's, as before.
    let other = frames::icmp_echo(
        (ROUTER.0, OUTSIDE),
        (UPLINK_MAC, [10, 99, 0, 1]),
        63,
        8,
        false,
    );
    let run = b.uplink(&other);
    assert_eq!((run.verdict, run.data), (TC_ACT_OK, other));
    let vx = overlay_ping_to_port0();
    let run = b.uplink(&vx);
    assert_eq!(
        run.verdict,
        TC_ACT_REDIRECT,
        "decapsulated to port 0: {:?}",
        b.drops()
    );
    assert_eq!(&run.data[0..6], &pod_mac(0));
    assert!(b.drops().is_empty(), "{:?}", b.drops());
}

/// EIP-15: a direct NIC belongs to no Vpc; an address of a Vpc (a Subnet Pod's) or a
/// ClusterIP is just another destination to the Node's routing table, which has
/// neither: the packet leaves for the upstream router, never into the cluster.
#[test]
fn eip_15_vpc_addresses_and_cluster_ips_are_not_reached_from_a_direct_nic() {
    let b = bed();
    for dst in [[10, 16, 0, 2], [10, 96, 0, 10]] {
        let f = frames::icmp_echo(pod(0), (gateway_mac(VNI), dst), 64, 8, false);
        let run = b.port(0, &f);
        assert_eq!(run.verdict, TC_ACT_REDIRECT, "{dst:?}: {:?}", b.drops());
        assert_eq!(
            &run.data[0..6],
            &ROUTER.0,
            "{dst:?} goes to the upstream router"
        );
        assert_eq!(&run.data[30..34], &dst, "unchanged: no DNAT");
    }
    assert_eq!(b.bed.tx(1), 0, "no Pod of this Node got it");
}

/// The holder's port kept in its `jn_eip_direct` entry is trusted only while that port
/// is still the holder: an ifindex given to another direct NIC (the holder's Pod gone,
/// the entry not yet rewritten) never receives the old ElasticIP's packets.
#[test]
fn eip_01_a_stale_holder_port_in_the_entry_is_checked_before_delivery() {
    let mut b = bed();
    let req = |to| frames::icmp_echo((ROUTER.0, OUTSIDE), (UPLINK_MAC, to), 63, 8, false);
    assert_eq!(b.uplink(&req(eip(1))).verdict, TC_ACT_REDIRECT);
    // Port 1 now serves another NIC (another MAC and ElasticIP); the entry for .101
    // still names its ifindex.
    let ifindex = b.bed.ifindex(1);
    b.dp.remove_port(ifindex).unwrap();
    b.dp.configure_port(PortSpec {
        ifindex,
        vni: VNI,
        mtu: 0,
        peer: true,
        security_groups: false,
        kind: PortKind::ElasticIp {
            mac: pod_mac(5),
            ip: eip(5).into(),
        },
    })
    .unwrap();
    let run = b.uplink(&req(eip(1)));
    assert_eq!(run.verdict, TC_ACT_SHOT, "delivered to the port's new NIC");
    assert_eq!(b.drops().get("EIP_NO_HOLDER"), Some(&1), "{:?}", b.drops());
    // Holder .100 on port 0 is untouched.
    assert_eq!(b.uplink(&req(eip(0))).verdict, TC_ACT_REDIRECT);
}

/// TTL 1 on every ElasticIP path is the Node stack's (it answers time exceeded, as a
/// router does), the frame untouched; a header with options is carried like any other,
/// one hop taken and its checksum still valid.
#[test]
fn eip_01_eip_09_ttl_1_goes_to_the_stack_and_ip_options_are_carried() {
    let b = bed();
    let last_hop = [
        // From outside to a local ElasticIP.
        (
            None,
            frames::icmp_echo((ROUTER.0, OUTSIDE), (UPLINK_MAC, eip(0)), 1, 8, false),
        ),
        // From a direct NIC to another ElasticIP of the Node.
        (
            Some(0),
            frames::icmp_echo(pod(0), (gateway_mac(VNI), eip(1)), 1, 8, false),
        ),
        // From a direct NIC to outside.
        (
            Some(0),
            frames::icmp_echo(pod(0), (gateway_mac(VNI), OUTSIDE), 1, 8, false),
        ),
    ];
    for (port, frame) in last_hop {
        let run = match port {
            Some(i) => b.port(i, &frame),
            None => b.uplink(&frame),
        };
        assert_eq!(
            (run.verdict, &run.data),
            (TC_ACT_OK, &frame),
            "from {port:?}"
        );
    }
    let opts = with_ip_options(&frames::icmp_echo(
        (ROUTER.0, OUTSIDE),
        (UPLINK_MAC, eip(0)),
        63,
        8,
        false,
    ));
    assert_eq!(ones_complement(&opts[14..38]), 0, "the test frame is valid");
    let run = b.uplink(&opts);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    let r = &run.data;
    assert_eq!(&r[0..6], &pod_mac(0));
    assert_eq!((r[14], r[22]), (0x46, 62), "options kept, one hop taken");
    assert_eq!(
        ones_complement(&r[14..38]),
        0,
        "the header checksum still holds"
    );
    assert_eq!(&r[34..38], &[1, 1, 1, 1]);
    assert!(b.drops().is_empty(), "{:?}", b.drops());
}

/// `juneau node --no-datapath-encap`: every frame between Nodes goes by the VXLAN
/// device, and the uplink's program still serves ElasticIPs: delivered here, handed to
/// the device for the holder's Node (not encapsulated in place), VXLAN to this Node
/// left to the stack and its device.
#[test]
fn eip_01_with_the_datapath_encapsulation_off_the_uplink_still_serves_elastic_ips() {
    let mut b = bed();
    b.dp.set_own_encap(false).unwrap();
    let req = |to| frames::icmp_echo((ROUTER.0, OUTSIDE), (UPLINK_MAC, to), 63, 8, false);
    let run = b.uplink(&req(eip(0)));
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(&run.data[0..6], &pod_mac(0));
    let away = req(eip(2));
    let run = b.uplink(&away);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
    assert_eq!(
        run.data.len(),
        away.len(),
        "to the device, not encapsulated here"
    );
    let vx = overlay_ping_to_port0();
    let run = b.uplink(&vx);
    assert_eq!(
        (run.verdict, &run.data),
        (TC_ACT_OK, &vx),
        "the device's to take"
    );
    // Back on: the same VXLAN frame is decapsulated in place again.
    b.dp.set_own_encap(true).unwrap();
    assert_eq!(b.uplink(&vx).verdict, TC_ACT_REDIRECT);
    assert!(b.drops().is_empty(), "{:?}", b.drops());
}
