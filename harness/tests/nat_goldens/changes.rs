//! A NAT connection while things change: the Node's address, the route, the Node's own
//! hop (NAT-01).
use super::*;

#[test]
fn nat_01_a_node_whose_address_changes_maps_its_live_connections_anew_and_frees_the_old_claim() {
    let mut s = scene();
    let first = frames::udp_ports((pod_mac(0), pod_ip(0), 40030), (GW_A, CLIENT, 53), b"one");
    let seen = s.send(0, 0, &first);
    assert_eq!(&s.frames(&seen, "underlay-node0")[0][26..30], &nat(0));
    // node0's attachment now has another address.
    let moved = [10, 99, 0, 120];
    s.cluster.nodes[0]
        .dataplane
        .sync_router(&router_state(ROUTE_NAT_GW, moved))
        .unwrap();
    let answers = BTreeMap::from([(Ipv4Addr::from(moved), mac(0))]);
    s.cluster.nodes[0]
        .dataplane
        .set_arp_answers(&answers)
        .unwrap();
    let again = frames::udp_ports((pod_mac(0), pod_ip(0), 40030), (GW_A, CLIENT, 53), b"two");
    let seen = s.send(0, 0, &again);
    let out = s.frames(&seen, "underlay-node0");
    assert_eq!(out.len(), 1);
    assert_eq!(
        &out[0][26..30],
        &moved,
        "from the address the Node answers for now"
    );
    let claims: Vec<[u8; 4]> = s.cluster.nodes[0]
        .dataplane
        .conntrack
        .entries()
        .unwrap()
        .into_iter()
        .filter(|(k, e)| k.zone == ZONE_HOST && e.flags & CT_F_NAT != 0)
        .map(|(k, _)| k.daddr.to_ne_bytes())
        .collect();
    assert_eq!(claims, vec![moved], "the old address's claim is gone");
}

#[test]
fn nat_01_an_established_connection_follows_a_route_change_at_its_next_packet_and_the_nodes_own_hop_within_a_second()
 {
    let mut s = scene();
    let datagram =
        |body: &[u8]| frames::udp_ports((pod_mac(0), pod_ip(0), 40040), (GW_A, CLIENT, 53), body);
    let out = |dmac: [u8; 6], body: &[u8]| {
        vec![hopped(frames::udp_ports(
            (mac(0), nat(0), 40040),
            (dmac, CLIENT, 53),
            body,
        ))]
    };
    let seen = s.send(0, 0, &datagram(b"one"));
    assert_eq!(s.frames(&seen, "underlay-node0"), &out(ROUTER.0, b"one"));
    let seen = s.send(0, 0, &datagram(b"two"));
    assert_eq!(s.frames(&seen, "underlay-node0"), &out(ROUTER.0, b"two"));
    let hop = original(&s, 40040).nat_hop();
    assert_ne!(hop.ifindex, 0, "the fast path cached the way out: {hop:?}");
    assert_eq!(hop.dmac.0.to_ne_bytes(), [ROUTER.0[0], ROUTER.0[1]]);
    // The table loses its NAT route: the next packet is routed by the table as it is
    // now (no route), not by the hop cached a moment ago.
    let mut no_nat = router_state(ROUTE_NAT_GW, nat(0));
    no_nat
        .tables
        .get_mut("t")
        .unwrap()
        .retain(|r| r.kind != ROUTE_NAT_GW);
    let epoch = s.cluster.nodes[0].dataplane.router.epoch().unwrap();
    s.cluster.nodes[0].dataplane.sync_router(&no_nat).unwrap();
    assert!(s.cluster.nodes[0].dataplane.router.epoch().unwrap() > epoch);
    let seen = s.send(0, 0, &datagram(b"three"));
    assert!(
        s.frames(&seen, "underlay-node0").is_empty(),
        "a route that is gone sends nothing out"
    );
    // Back: out again, and by the fast path.
    s.cluster.nodes[0]
        .dataplane
        .sync_router(&router_state(ROUTE_NAT_GW, nat(0)))
        .unwrap();
    let seen = s.send(0, 0, &datagram(b"four"));
    assert_eq!(s.frames(&seen, "underlay-node0"), &out(ROUTER.0, b"four"));
    // The Node's own next hop changes its MAC (the daemon does not watch the Node's
    // neighbours): the cached hop serves the second it was looked up in at most.
    let moved = [0x02, 0, 0, 0x99, 0, 0x77];
    let router = Ipv4Addr::from(ROUTER.1).to_string();
    s.cluster.nodes[0].ns.ip(&[
        "neigh",
        "replace",
        &router,
        "lladdr",
        &juneau::format_mac(&moved),
        "dev",
        UNDERLAY_DEV,
        "nud",
        "permanent",
    ]);
    // Tries until the new MAC shows, for three seconds at most (three lives of a hop).
    let changed_at = std::time::Instant::now();
    let mut last = Vec::new();
    while changed_at.elapsed() < std::time::Duration::from_secs(3) {
        let seen = s.send(0, 0, &datagram(b"five"));
        last = s.frames(&seen, "underlay-node0").clone();
        if last == out(moved, b"five") {
            break;
        }
        assert_eq!(last, out(ROUTER.0, b"five"), "the old hop or the new one");
    }
    assert_eq!(
        last,
        out(moved, b"five"),
        "the new next hop within three seconds (a cached hop lives one)"
    );
}
