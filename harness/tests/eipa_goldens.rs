//! 1:1 NAT of an ElasticIP attached to a Subnet NIC, on the wire (NAT-03), on the
//! scene of `nat_scene` with Subnet NICs: Pod 0 on node0 has ElasticIP 10.99.0.105
//! attached (node0 answers ARP for it), Pod 2 beside it has none, Pod 1 is on node1.
//! The table routes 0.0.0.0/0 via the internet gateway, whose fallback is the Vpc's
//! NATGateway at node0's .110 and node1's .111. Captures are compared with
//! `pcaps/<test>/`.
mod nat_scene;

use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::features::policy::node::{Compiled, PolicyState, compile};
use juneau::node::dataplane::Holder;
use juneau_common::{gw::ROUTE_INTERNET_GW, policy::SET_ACL};
use juneau_harness::{
    frames::{self, fixtures::*, ones_complement},
    node::{Cluster, node_ip},
    scene::Scene,
};
use nat_scene::*;

const EIP: [u8; 4] = [10, 99, 0, 105];
const ACL: u32 = 9;

fn scene() -> Scene {
    scene_with(None)
}

/// The scene, Subnet A with the NetworkACL `acl` when given.
fn scene_with(acl: Option<Compiled>) -> Scene {
    let mut c = Cluster::new(2);
    let holders = BTreeMap::from([(
        Ipv4Addr::from(EIP),
        Holder {
            mac: pod_mac(0),
            vni: VNI_A,
            node: node_ip(0),
            pod_ip: Some(pod_ip(0).into()),
        },
    )]);
    for (n, node) in c.nodes.iter_mut().enumerate() {
        let mut want = router_state(ROUTE_INTERNET_GW, nat(n as u8));
        if let Some(acl) = &acl {
            want.segments.get_mut(&VNI_A).unwrap().acl = ACL;
            let rules = PolicyState {
                sets: [(ACL, acl.clone())].into(),
                nics: Default::default(),
            };
            node.dataplane.policy.sync(&rules).unwrap();
        }
        node.dataplane.sync_router(&want).unwrap();
        way_out(node, n);
        node.dataplane.set_elastic_ips(&holders).unwrap();
    }
    // node0 answers for its NAT address and the ElasticIP; Pod 0's port carries it.
    let answers = BTreeMap::from([
        (Ipv4Addr::from(nat(0)), mac(0)),
        (Ipv4Addr::from(EIP), mac(0)),
    ]);
    c.nodes[0].dataplane.set_arp_answers(&answers).unwrap();
    c.add_pod(0, 0, ON_A.subnet(pod_ip(0)));
    c.add_pod(1, 1, ON_A.subnet(pod_ip(1)));
    c.add_pod(0, 2, ON_A.subnet(pod_ip(2)));
    let public = BTreeMap::from([((VNI_A, Ipv4Addr::from(pod_ip(0))), Ipv4Addr::from(EIP))]);
    for node in &mut c.nodes {
        node.dataplane.set_public_addresses(public.clone()).unwrap();
        // The ports written before the ElasticIP entries: the local one found again.
        node.dataplane.set_elastic_ips(&holders).unwrap();
    }
    Scene::new(c)
}

/// The datagram `frame` with its destination `to` (the header's and UDP's checksums
/// again, as a 1:1 rewrite leaves them).
fn to_pod(query: &[u8], to: [u8; 4]) -> Vec<u8> {
    let sport = u16::from_be_bytes([query[34], query[35]]);
    let dport = u16::from_be_bytes([query[36], query[37]]);
    frames::udp_ports(
        (GW_A, query[26..30].try_into().unwrap(), sport),
        (pod_mac(0), to, dport),
        &query[42..],
    )
}

#[test]
fn nat_03_an_outside_datagram_to_the_elastic_ip_reaches_the_pod_with_only_its_destination_rewritten()
 {
    let mut s = scene();
    let hello = frames::udp_ports((ROUTER.0, CLIENT, 40001), (mac(0), EIP, 8080), b"hello");
    let seen = from_router(&mut s, 0, &hello);
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![hopped(to_pod(&hello, pod_ip(0)))],
        "the client's own address and ports, the Pod's address, one hop, from the gateway"
    );
    assert!(
        s.frames(&seen, "node0-pod1").is_empty(),
        "not to Pod 2, beside it"
    );
    // A stale ARP cache sends it to node1: carried over the overlay with the Subnet's
    // VNI to the NIC's Node, translated once.
    let late = frames::udp_ports((ROUTER.0, CLIENT, 40001), (mac(1), EIP, 8080), b"late");
    let seen = from_router(&mut s, 1, &late);
    let wire = s.frames(&seen, "underlay-node1");
    assert_eq!(wire.len(), 1, "carried once");
    assert_eq!(&wire[0][30..34], &node_ip(0).octets(), "to the NIC's Node");
    let vni = u32::from_be_bytes([0, wire[0][46], wire[0][47], wire[0][48]]);
    assert_eq!(vni, VNI_A, "with the Subnet's VNI");
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][26..34], &[CLIENT, pod_ip(0)].concat()[..]);
    assert_eq!(ones_complement(&got[0][14..34]), 0);
    s.assert_goldens("nat_03_eip_in");
}

#[test]
fn nat_03_the_pods_packets_leave_from_the_elastic_ip_and_a_nic_without_one_by_the_nat_gateway() {
    let mut s = scene();
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 40000), (GW_A, CLIENT, 53), b"query");
    let seen = s.send(0, 0, &query);
    assert_eq!(
        s.frames(&seen, "underlay-node0"),
        &vec![hopped(frames::udp_ports(
            (mac(0), EIP, 40000),
            (ROUTER.0, CLIENT, 53),
            b"query"
        ))],
        "the ElasticIP as its source, the port kept"
    );
    let echo = frames::icmp_echo((pod_mac(0), pod_ip(0)), (GW_A, CLIENT), 64, 8, false);
    let seen = s.send(0, 0, &echo);
    let out = s.frames(&seen, "underlay-node0");
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][26..30], &EIP, "an echo from the ElasticIP");
    assert_eq!(&out[0][38..40], &echo[38..40], "its identifier kept");
    let end = 14 + usize::from(u16::from_be_bytes([out[0][16], out[0][17]]));
    assert_eq!(
        ones_complement(&out[0][34..end]),
        0,
        "its checksum untouched and right"
    );
    // Pod 2, beside it without an attachment: by the NATGateway.
    let other = frames::udp_ports((pod_mac(2), pod_ip(2), 40000), (GW_A, CLIENT, 53), b"other");
    let seen = s.send(0, 1, &other);
    let out = s.frames(&seen, "underlay-node0");
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][26..30], &nat(0), "the Node's NATGateway address");
    s.assert_goldens("nat_03_eip_out");
}

#[test]
fn nat_03_an_icmp_error_is_translated_both_ways() {
    let mut s = scene();
    // Out: the Pod's datagram leaves from the ElasticIP, the server refuses its port.
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 40003), (GW_A, CLIENT, 53), b"query");
    let seen = s.send(0, 0, &query);
    let wire = s.frames(&seen, "underlay-node0").clone();
    assert_eq!(wire.len(), 1);
    let refusal = frames::icmp_error((ROUTER.0, CLIENT), (mac(0), EIP), (3, 3, [0; 4]), &wire[0]);
    let seen = from_router(&mut s, 0, &refusal);
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![hopped(frames::icmp_error(
            (GW_A, CLIENT),
            (pod_mac(0), pod_ip(0)),
            (3, 3, [0; 4]),
            &hopped(query)
        ))],
        "to the Pod, quoting its own address, every checksum right"
    );
    // In: an outside datagram to a port the Pod does not serve; the Pod's port
    // unreachable leaves quoting the ElasticIP.
    let hello = frames::udp_ports((ROUTER.0, CLIENT, 40001), (mac(0), EIP, 9), b"hello");
    let seen = from_router(&mut s, 0, &hello);
    let arrived = s.frames(&seen, "node0-pod0").clone();
    assert_eq!(arrived.len(), 1);
    let unreachable = frames::icmp_error(
        (pod_mac(0), pod_ip(0)),
        (GW_A, CLIENT),
        (3, 3, [0; 4]),
        &arrived[0],
    );
    let seen = s.send(0, 0, &unreachable);
    let mut sent_back = hello.clone();
    // The datagram as the client sent it, one hop on at the router as it reached us:
    // its quote as the Pod saw it, translated back to the ElasticIP.
    sent_back[22] -= 1;
    sent_back[24..26].fill(0);
    let sum = ones_complement(&sent_back[14..34]);
    sent_back[24..26].copy_from_slice(&sum.to_be_bytes());
    assert_eq!(
        s.frames(&seen, "underlay-node0"),
        &vec![hopped(frames::icmp_error(
            (mac(0), EIP),
            (ROUTER.0, CLIENT),
            (3, 3, [0; 4]),
            &sent_back
        ))],
        "from the ElasticIP, quoting it, every checksum right"
    );
    // An error quoting another address is not the Pod's to send: dropped by name.
    let drops = |s: &Scene| s.cluster.nodes[0].dataplane.drops().unwrap()["EIP_NAT_UNMAPPABLE"];
    let before = drops(&s);
    let mut stranger = hello.clone();
    stranger[26..30].copy_from_slice(&[203, 0, 113, 7]);
    stranger[24..26].fill(0);
    let sum = ones_complement(&stranger[14..34]);
    stranger[24..26].copy_from_slice(&sum.to_be_bytes());
    let forged = frames::icmp_error(
        (pod_mac(0), pod_ip(0)),
        (GW_A, CLIENT),
        (3, 3, [0; 4]),
        &stranger,
    );
    let seen = s.send(0, 0, &forged);
    assert!(s.frames(&seen, "underlay-node0").is_empty());
    assert_eq!(drops(&s), before + 1);
    s.assert_goldens("nat_03_eip_icmp_errors");
}

#[test]
fn nat_03_pol_03_the_subnets_acl_judges_what_comes_in_and_lets_the_pods_own_replies_back() {
    // Subnet A's NetworkACL lets in TCP 22 only; everything may leave.
    let ingress: Vec<juneau::api::networkacl::AclRule> = serde_json::from_value(
        serde_json::json!([{"priority": 10, "action": "allow", "protocol": "tcp", "ports": [{"port": 22}]}]),
    )
    .unwrap();
    let acl = Compiled {
        kind: SET_ACL,
        version: 1,
        dirs: [
            compile::acl_direction(Some(&ingress)).0,
            compile::acl_direction(None).0,
        ],
    };
    let mut s = scene_with(Some(acl));
    let drops = |s: &Scene| s.cluster.nodes[0].dataplane.drops().unwrap()["POLICY_ACL_INGRESS"];
    let before = drops(&s);
    let hello = frames::udp_ports((ROUTER.0, CLIENT, 40001), (mac(0), EIP, 8080), b"hello");
    let seen = from_router(&mut s, 0, &hello);
    assert!(
        s.frames(&seen, "node0-pod0").is_empty(),
        "an outside datagram the ACL does not let in never reaches the Pod"
    );
    assert_eq!(
        drops(&s),
        before + 1,
        "dropped by the receiver's ACL, by name"
    );
    // The Pod's own query out, and its answer back through the same ACL.
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 40000), (GW_A, CLIENT, 53), b"query");
    let seen = s.send(0, 0, &query);
    assert_eq!(s.frames(&seen, "underlay-node0").len(), 1);
    let answer = frames::udp_ports((ROUTER.0, CLIENT, 53), (mac(0), EIP, 40000), b"answer");
    let seen = from_router(&mut s, 0, &answer);
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![hopped(to_pod(&answer, pod_ip(0)))],
        "the reply of the Pod's own connection comes in"
    );
    assert_eq!(drops(&s), before + 1);
    s.assert_goldens("nat_03_eip_acl");
}

#[test]
fn nat_03_a_connection_the_nat_gateway_mapped_before_the_attachment_keeps_its_mapping() {
    let mut s = scene();
    // Pod 2 has no ElasticIP: its query goes out by the NATGateway.
    let query = |sport: u16, data: &[u8]| {
        frames::udp_ports((pod_mac(2), pod_ip(2), sport), (GW_A, CLIENT, 53), data)
    };
    let seen = s.send(0, 1, &query(41000, b"before"));
    assert_eq!(&s.frames(&seen, "underlay-node0")[0][26..30], &nat(0));
    // Now an ElasticIP is attached to it too.
    let public = BTreeMap::from([
        ((VNI_A, Ipv4Addr::from(pod_ip(0))), Ipv4Addr::from(EIP)),
        (
            (VNI_A, Ipv4Addr::from(pod_ip(2))),
            Ipv4Addr::from([10, 99, 0, 106]),
        ),
    ]);
    s.cluster.nodes[0]
        .dataplane
        .set_public_addresses(public)
        .unwrap();
    let seen = s.send(0, 1, &query(41000, b"after"));
    assert_eq!(
        &s.frames(&seen, "underlay-node0")[0][26..30],
        &nat(0),
        "the live connection keeps its NATGateway mapping"
    );
    // A datagram of it in two fragments: both halves by the NATGateway, the later one
    // (no ports) by what its first recorded.
    fragments_leave_from(
        &mut s,
        &query(41000, &[7; 40]),
        0x4242,
        nat(0),
        "by the NATGateway",
    );
    let seen = s.send(0, 1, &query(41001, b"new"));
    assert_eq!(
        &s.frames(&seen, "underlay-node0")[0][26..30],
        &[10, 99, 0, 106],
        "a new one leaves from its ElasticIP"
    );
    // A new connection's fragments both leave from the ElasticIP.
    fragments_leave_from(
        &mut s,
        &query(41002, &[7; 40]),
        0x4343,
        [10, 99, 0, 106],
        "1:1",
    );
}

/// Both fragments of `datagram` (IPv4 identification `id`), sent into Node 0's port 1,
/// leave Node 0 from `from`.
fn fragments_leave_from(s: &mut Scene, datagram: &[u8], id: u16, from: [u8; 4], how: &str) {
    let (first, later) = frames::fragments(datagram, 24, id);
    for (what, piece) in [("first", first), ("later", later)] {
        let seen = s.send(0, 1, &piece);
        let out = s.frames(&seen, "underlay-node0");
        assert_eq!(out.len(), 1, "the {what} fragment out");
        assert_eq!(&out[0][26..30], &from, "the {what} fragment {how}");
    }
}

/// UDP's pseudo-header of `frame` (IPv4 at 14) summed and folded, not complemented:
/// what a `CHECKSUM_PARTIAL` packet carries in its checksum field.
fn pseudo_sum(frame: &[u8]) -> u16 {
    let len = u16::from_be_bytes([frame[16], frame[17]]) - 20;
    let pseudo = [&frame[26..34], &[0, 17], &len.to_be_bytes()[..]].concat();
    !ones_complement(&pseudo)
}

/// The UDP datagram to `dst` whose full checksum equals its pseudo-header's sum: the
/// one value that cannot tell a finished checksum from a partial one.
fn ambiguous(src: ([u8; 6], [u8; 4], u16), dst: ([u8; 6], [u8; 4], u16)) -> Vec<u8> {
    (0..=u16::MAX)
        .map(|w| frames::udp_ports(src, dst, &w.to_be_bytes()))
        .find(|f| f[40..42] == pseudo_sum(f).to_be_bytes())
        .expect("a payload word that makes the checksum equal the pseudo-header's sum")
}

/// Whether the UDP checksum of `frame` is right (or absent).
fn udp_checksum_right(frame: &[u8]) -> bool {
    let len = u16::from_be_bytes([frame[38], frame[39]]);
    let pseudo = [&frame[26..34], &[0, 17], &len.to_be_bytes()[..]].concat();
    frame[40..42] == [0, 0]
        || ones_complement(&[&pseudo[..], &frame[34..34 + usize::from(len)]].concat()) == 0
}

#[test]
fn nat_03_the_transport_checksum_is_updated_right_whatever_the_field_holds() {
    let mut s = scene();
    // No checksum (0): a UDP datagram keeps none.
    let mut bare = frames::udp_ports((ROUTER.0, CLIENT, 40001), (mac(0), EIP, 8080), b"bare");
    bare[40..42].fill(0);
    let seen = from_router(&mut s, 0, &bare);
    let mut want = hopped(to_pod(&bare, pod_ip(0)));
    want[40..42].fill(0);
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![want],
        "no checksum made up"
    );
    // A full checksum that equals the pseudo-header's sum (the datapath leaves the
    // update to the kernel then): still right at the Pod.
    let odd = ambiguous((ROUTER.0, CLIENT, 40002), (mac(0), EIP, 8080));
    let seen = from_router(&mut s, 0, &odd);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got, &vec![hopped(to_pod(&odd, pod_ip(0)))]);
    assert!(udp_checksum_right(&got[0]));
    // The same both ways out of the Pod: a datagram without a checksum, one whose
    // checksum equals its pseudo-header's sum, and an ordinary one.
    let mut none = frames::udp_ports((pod_mac(0), pod_ip(0), 40003), (GW_A, CLIENT, 53), b"none");
    none[40..42].fill(0);
    let odd = ambiguous((pod_mac(0), pod_ip(0), 40004), (GW_A, CLIENT, 53));
    let plain = frames::udp_ports((pod_mac(0), pod_ip(0), 40005), (GW_A, CLIENT, 53), b"plain");
    for (what, frame) in [("none", none), ("ambiguous", odd), ("plain", plain)] {
        let seen = s.send(0, 0, &frame);
        let out = s.frames(&seen, "underlay-node0");
        assert_eq!(out.len(), 1, "{what}: one datagram out");
        assert_eq!(&out[0][26..30], &EIP, "{what}: from the ElasticIP");
        assert_eq!(out[0][40..42] == [0, 0], frame[40..42] == [0, 0], "{what}");
        assert!(udp_checksum_right(&out[0]), "{what}: its checksum right");
    }
}
