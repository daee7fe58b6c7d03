use super::*;

/// The bed's upstream: three Nodes in AS 64513, BFD 100 ms x 3, GR on.
fn bed() -> Upstream {
    Upstream {
        hostname: "upstream".into(),
        local_as: 64512,
        router_id: Ipv4Addr::new(10, 201, 0, 254),
        neighbors: (1..=3)
            .map(|i| Neighbor {
                address: Ipv4Addr::new(10, 201, 0, i),
                remote_as: 64513,
            })
            .collect(),
        bfd: Some(BfdProfile {
            interval_ms: 100,
            multiplier: 3,
        }),
        timers: Timers::default(),
        graceful_restart: true,
    }
}

#[test]
fn bgp_01_upstream_frr_confs_of_three_nodes_with_bfd_and_gr() {
    let up = bed();
    assert_eq!(zebra_conf(&up), include_str!("testdata/golden/zebra.conf"));
    assert_eq!(bfdd_conf(&up), include_str!("testdata/golden/bfdd.conf"));
    assert_eq!(bgpd_conf(&up), include_str!("testdata/golden/bgpd.conf"));
}

#[test]
fn bgp_01_without_bfd_no_neighbor_names_a_profile_and_gr_off_is_disable() {
    let up = Upstream {
        bfd: None,
        graceful_restart: false,
        ..bed()
    };
    assert_eq!(
        bfdd_conf(&up),
        include_str!("testdata/golden/bfdd-off.conf")
    );
    assert_eq!(
        bgpd_conf(&up),
        include_str!("testdata/golden/bgpd-nobfd-nogr.conf")
    );
}

#[test]
fn bgp_01_nodes_of_different_ases_carry_their_own_remote_as() {
    // As `examples/render mixed-as`, which the conf check of docs/bgp-bed/frr.md ran through FRR: timers and
    // BFD off their defaults too, so running-config shows every one of them.
    let mut up = bed();
    up.neighbors[2].remote_as = 64514;
    up.bfd = Some(BfdProfile {
        interval_ms: 200,
        multiplier: 5,
    });
    up.timers = Timers {
        keepalive: 10,
        hold: 30,
        connect_retry: 7,
    };
    assert_eq!(
        bfdd_conf(&up),
        include_str!("testdata/golden/bfdd-mixed-as.conf")
    );
    let conf = bgpd_conf(&up);
    assert_eq!(conf, include_str!("testdata/golden/bgpd-mixed-as.conf"));
    assert!(!conf.contains("neighbor NODES remote-as"));
    let own = conf
        .find(" neighbor 10.201.0.3 remote-as 64514")
        .expect("own AS");
    let member = conf
        .find(" neighbor 10.201.0.3 peer-group NODES")
        .expect("member");
    assert!(own < member, "FRR needs remote-as before the member joins");
}

#[test]
fn bgp_01_no_nodes_renders_a_group_without_remote_as() {
    let up = Upstream {
        neighbors: vec![],
        ..bed()
    };
    let conf = bgpd_conf(&up);
    assert!(!conf.contains("remote-as"));
    assert!(conf.contains(" neighbor NODES peer-group\n"));
}

#[test]
fn bgp_01_bfd_on_names_the_profile_and_never_check_control_plane_failure() {
    let conf = bgpd_conf(&bed());
    assert!(conf.contains(" neighbor NODES bfd profile juneau\n"));
    // It made FRR ignore every BFD down from BIRD (C bit clear): see frr.rs.
    assert!(!conf.contains("check-control-plane-failure"));
}

#[test]
fn bgp_01_route_maps_are_defined_before_the_neighbors_name_them() {
    // Named before they exist, bgpd denied the first UPDATEs for 5 s (docs/bgp-bed/frr.md).
    let conf = bgpd_conf(&bed());
    let defined = conf.find("route-map NODES-IN permit 10").expect("defined");
    let named = conf.find("route-map NODES-IN in").expect("named");
    assert!(defined < conf.find("router bgp").expect("router") && defined < named);
}
