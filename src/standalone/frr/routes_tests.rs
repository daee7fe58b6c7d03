//! Every fixture was captured from FRR 8.4.4 in the bed (`docs/bgp-bed/frr.md`), none written by hand.
use super::*;

fn ip(s: &str) -> Option<Ipv4Addr> {
    Some(s.parse().expect("test address"))
}

fn hop(a: &str) -> NextHop {
    NextHop {
        address: ip(a),
        interface: Some("ul0".into()),
        active: true,
        fib: true,
    }
}

#[test]
fn bgp_01_three_nodes_give_the_upstream_three_ecmp_next_hops() {
    let json = include_str!("testdata/show-ip-route-203.0.113.0-24-three.json");
    let hops = installed_next_hops(json, "203.0.113.0/24").expect("parses");
    assert_eq!(
        hops,
        [hop("10.201.0.1"), hop("10.201.0.2"), hop("10.201.0.3")]
    );
    let routes = parse_routes(json).expect("parses");
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].protocol, "bgp");
    assert!(routes[0].selected && routes[0].installed);
}

#[test]
fn bgp_01_a_node_lost_by_bfd_leaves_two_next_hops() {
    let json = include_str!("testdata/show-ip-route-203.0.113.0-24-two.json");
    let hops = installed_next_hops(json, "203.0.113.0/24").expect("parses");
    assert_eq!(hops, [hop("10.201.0.2"), hop("10.201.0.3")]);
}

#[test]
fn bgp_01_a_lookup_by_address_is_keyed_by_the_matching_prefix() {
    let json = include_str!("testdata/show-ip-route-lookup-203.0.113.10.json");
    assert_eq!(
        installed_next_hops(json, "203.0.113.0/24")
            .expect("parses")
            .len(),
        3
    );
    assert!(
        installed_next_hops(json, "203.0.113.10/32")
            .expect("parses")
            .is_empty()
    );
}

#[test]
fn bgp_02_a_slash_32_of_one_node_has_one_next_hop() {
    let json = include_str!("testdata/show-ip-route-192.0.2.2-32.json");
    let hops = installed_next_hops(json, "192.0.2.2/32").expect("parses");
    assert_eq!(hops, [hop("10.201.0.2")]);
}

#[test]
fn bgp_01_a_prefix_without_a_route_has_no_next_hop() {
    let json = include_str!("testdata/show-ip-route-absent.json");
    assert!(parse_routes(json).expect("parses").is_empty());
    assert!(
        installed_next_hops(json, "198.51.100.0/24")
            .expect("parses")
            .is_empty()
    );
}

#[test]
fn bgp_01_a_connected_route_has_an_interface_and_no_address() {
    let json = include_str!("testdata/show-ip-route-connected.json");
    let hops = installed_next_hops(json, "10.201.0.0/24").expect("parses");
    assert_eq!(
        hops,
        [NextHop {
            address: None,
            interface: Some("ul0".into()),
            active: true,
            fib: true,
        }]
    );
}

#[test]
fn bgp_01_vtysh_text_instead_of_json_is_an_error() {
    let err = parse_routes("% Unknown command: show ip rout\n").expect_err("not JSON");
    assert!(err.to_string().starts_with("not FRR's JSON"), "{err}");
}

#[test]
fn bgp_03_summary_of_three_established_sessions() {
    let json = include_str!("testdata/show-bgp-summary-established.json");
    let s = parse_bgp_summary(json).expect("parses");
    assert_eq!(s.len(), 3);
    for (i, n) in s.iter().enumerate() {
        assert_eq!(n.family, "ipv4Unicast");
        assert_eq!(n.neighbor, format!("10.201.0.{}", i + 1));
        assert_eq!(n.remote_as, 64513);
        assert!(n.established(), "{n:?}");
        assert_eq!(n.pfx_rcd, 2, "the /24 and the Node's /32");
        assert_eq!(n.uptime, "00:00:03");
        assert_eq!(n.uptime_ms, 3_000);
    }
}

#[test]
fn bgp_03_summary_with_a_node_down_says_idle_and_zero_prefixes() {
    let json = include_str!("testdata/show-bgp-summary-one-down.json");
    let s = parse_bgp_summary(json).expect("parses");
    let down: Vec<_> = s.iter().filter(|n| !n.established()).collect();
    assert_eq!(down.len(), 1);
    assert_eq!(down[0].neighbor, "10.201.0.1");
    assert_eq!(down[0].state, "Idle");
    assert_eq!(down[0].pfx_rcd, 0);
    assert_eq!(s.iter().filter(|n| n.established()).count(), 2);
}

#[test]
fn bgp_03_summary_before_any_session_came_up_says_idle_never() {
    let json = include_str!("testdata/show-bgp-summary-starting.json");
    let s = parse_bgp_summary(json).expect("parses");
    assert_eq!(s.len(), 3);
    for n in &s {
        assert_eq!((n.state.as_str(), n.uptime.as_str()), ("Idle", "never"));
        assert_eq!((n.uptime_ms, n.pfx_rcd), (0, 0));
    }
}

#[test]
fn bgp_03_summary_of_a_killed_speaker_past_its_restart_time_says_active_since() {
    // bird SIGKILLed and not restarted: GR kept its routes 30 s, then dropped them.
    let json = include_str!("testdata/show-bgp-summary-one-killed.json");
    let s = parse_bgp_summary(json).expect("parses");
    let dead = s
        .iter()
        .find(|n| n.neighbor == "10.201.0.1")
        .expect("listed");
    assert_eq!(dead.state, "Active");
    assert!(!dead.established());
    assert_eq!((dead.uptime.as_str(), dead.uptime_ms), ("00:00:30", 30_000));
    assert_eq!(dead.pfx_rcd, 0);
}

#[test]
fn bgp_03_summary_of_a_family_without_sessions_is_empty() {
    // `show bgp ipv6 unicast summary json`: no Node is activated for IPv6.
    let json = include_str!("testdata/show-bgp-ipv6-summary-none.json");
    assert!(parse_bgp_summary(json).expect("parses").is_empty());
}
