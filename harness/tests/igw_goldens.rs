//! A route via the internet gateway on the wire (NAT-03), on the scene of
//! `nat_scene`: a NIC without an ElasticIP attached leaves through the Vpc's
//! NATGateway, from its own Node's address, and its replies come back; on a Node where
//! that gateway has no address the packet is refused at once and counted by name
//! (`IGW_NO_PUBLIC_ADDRESS`), never routed by a shorter route. Captures are compared
//! with `pcaps/<test>/`.
mod nat_scene;

use juneau_common::gw::ROUTE_INTERNET_GW;
use juneau_harness::{
    frames::{self, fixtures::*},
    scene::Scene,
};
use nat_scene::*;

#[test]
fn nat_03_a_nic_without_attachment_leaves_by_the_nat_gateway_or_is_refused_by_name() {
    let mut s = scene_with(ROUTE_INTERNET_GW, false);
    let query = frames::udp_ports((pod_mac(0), pod_ip(0), 40000), (GW_A, CLIENT, 53), b"query");
    let seen = s.send(0, 0, &query);
    assert_eq!(
        s.frames(&seen, "underlay-node0"),
        &vec![hopped(frames::udp_ports(
            (mac(0), nat(0), 40000),
            (ROUTER.0, CLIENT, 53),
            b"query"
        ))],
        "out by node0's own routing table, from its NATGateway address, the port kept"
    );
    let answer = frames::udp_ports((ROUTER.0, CLIENT, 53), (mac(0), nat(0), 40000), b"answer");
    let seen = from_router(&mut s, 0, &answer);
    assert_eq!(
        s.frames(&seen, "node0-pod0"),
        &vec![hopped(frames::udp_ports(
            (GW_A, CLIENT, 53),
            (pod_mac(0), pod_ip(0), 40000),
            b"answer"
        ))],
        "given its client back"
    );
    // node1: the Vpc's NATGateway has no address there, and the NIC no ElasticIP.
    let drops = |s: &Scene, why: &str| s.cluster.nodes[1].dataplane.drops().unwrap()[why];
    let (igw, nat_none) = (
        drops(&s, "IGW_NO_PUBLIC_ADDRESS"),
        drops(&s, "NAT_NO_ADDRESS"),
    );
    let query = frames::udp_ports((pod_mac(1), pod_ip(1), 40000), (GW_A, CLIENT, 53), b"query");
    let seen = s.send(1, 0, &query);
    for n in 0..2 {
        assert!(
            s.frames(&seen, &format!("underlay-node{n}")).is_empty(),
            "node{n}: nothing leaves"
        );
    }
    assert_eq!(drops(&s, "IGW_NO_PUBLIC_ADDRESS"), igw + 1);
    assert_eq!(
        drops(&s, "NAT_NO_ADDRESS"),
        nat_none,
        "counted by its own name"
    );
    assert_told_prohibited(&s, &seen, 1);
    s.assert_goldens("nat_03_igw_fallback");
}
