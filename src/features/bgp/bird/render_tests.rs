use super::*;

use std::path::Path;
use std::process::Command;

/// The plan's node-a (section 2): two peers, one with BFD, one without.
fn node_a() -> Intent {
    Intent {
        node: "node-a".into(),
        router_id: Ipv4Addr::new(10, 99, 0, 1),
        local_address: Ipv4Addr::new(10, 99, 0, 1),
        // Listed out of order on purpose: the output sorts.
        peers: vec![
            peer("upstream-b", Ipv4Addr::new(10, 99, 0, 253), None),
            upstream(),
        ],
        prefixes: vec![
            announce("203.0.113.0/24", "BGPAdvertisement wan-all (pool wan)"),
            announce(
                "192.0.2.1/32",
                "BGPAdvertisement ena-ext-net--node-a (pool nat-wan)",
            ),
        ],
    }
}

fn upstream() -> Peer {
    let bfd = Bfd {
        interval_ms: 100,
        multiplier: 3,
    };
    peer("upstream", Ipv4Addr::new(10, 99, 0, 254), Some(bfd))
}

fn peer(name: &str, address: Ipv4Addr, bfd: Option<Bfd>) -> Peer {
    Peer {
        name: name.into(),
        my_asn: 64513,
        peer_asn: 64512,
        peer_address: address,
        peer_port: 179,
        hold_time: 90,
        bfd,
    }
}

fn announce(prefix: &str, comment: &str) -> Announce {
    Announce {
        prefix: prefix.parse().expect("test prefix"),
        comment: comment.into(),
    }
}

fn rendered(intent: &Intent) -> String {
    render(intent).expect("renders")
}

/// The text after the static protocol: filter, template, peers.
fn after_static(text: &str) -> &str {
    let at = text.find("filter jn_export").expect("has the filter");
    &text[at..]
}

/// The text before the static protocol.
fn before_static(text: &str) -> &str {
    let at = text
        .find("protocol static")
        .expect("has the static protocol");
    &text[..at]
}

#[test]
fn bgp_01_bird_conf_of_a_node_with_two_peers() {
    // testdata/node-a.conf is the plan's sample with its two routes sorted.
    let golden = include_str!("../testdata/node-a.conf");
    assert_eq!(rendered(&node_a()), golden);
}

#[test]
fn bgp_01_the_order_of_the_intent_does_not_change_the_file() {
    let mut other = node_a();
    other.peers.reverse();
    other.prefixes.reverse();
    assert_eq!(rendered(&other), rendered(&node_a()));
}

#[test]
fn bgp_02_a_changed_advertisement_changes_static_routes_not_the_filter() {
    let before = rendered(&node_a());
    let mut changed = node_a();
    changed.prefixes.remove(1);
    changed.prefixes.push(announce(
        "198.51.100.0/25",
        "BGPAdvertisement wan-b (pool wan)",
    ));
    let after = rendered(&changed);
    assert_ne!(before, after);
    assert_eq!(after_static(&before), after_static(&after));
    assert_eq!(before_static(&before), before_static(&after));
    assert!(
        after
            .contains("  route 198.51.100.0/25 blackhole;   # BGPAdvertisement wan-b (pool wan)\n")
    );
    assert!(!after.contains("192.0.2.1/32"));
}

#[test]
fn bgp_02_a_prefix_of_two_advertisements_is_one_route_naming_both() {
    let mut intent = node_a();
    intent.prefixes.push(announce(
        "203.0.113.0/24",
        "BGPAdvertisement wan-a (pool wan)",
    ));
    let text = rendered(&intent);
    assert_eq!(text.matches("route 203.0.113.0/24").count(), 1);
    assert!(
        text.contains("# BGPAdvertisement wan-a (pool wan); BGPAdvertisement wan-all (pool wan)\n")
    );
}

#[test]
fn bgp_02_no_prefix_gives_an_empty_static_protocol() {
    let mut intent = node_a();
    intent.prefixes.clear();
    let text = rendered(&intent);
    assert!(text.contains("protocol static jn_announce {\n  ipv4 { table jn_adv; };\n}\n"));
}

#[test]
fn bgp_02_a_prefix_with_host_bits_is_refused() {
    let mut intent = node_a();
    intent.prefixes.push(announce("203.0.113.5/24", "x"));
    let err = render(&intent).expect_err("host bits");
    assert_eq!(
        err,
        RenderError::HostBits("203.0.113.5/24".parse().expect("net"))
    );
}

#[test]
fn bgp_01_a_long_peer_name_is_shortened_with_a_stable_hash() {
    let long = "a".repeat(61);
    assert_eq!(protocol_name(&long), format!("jn-{long}"));
    let longer = format!("{}.rack-7.example.net", "b".repeat(50));
    let symbol = protocol_name(&longer);
    assert_eq!(symbol.len(), 62);
    // FNV-1a of the name, checked against an independent Python FNV-1a.
    // Fixed by its definition: a changed symbol would reset the session.
    assert_eq!(symbol, format!("jn-{}-004ee92f", "b".repeat(50)));
    let other = format!("{}.rack-8.example.net", "b".repeat(50));
    assert_ne!(protocol_name(&other), symbol);
}

#[test]
fn bgp_01_the_description_keeps_a_long_name_whole() {
    let mut intent = node_a();
    let name = format!("{}-x", "c".repeat(70));
    intent.peers = vec![peer(&name, Ipv4Addr::new(10, 99, 0, 9), None)];
    let text = rendered(&intent);
    assert!(text.contains(&format!("  description \"BGPPeer {name}\";\n")));
    assert!(text.contains(&format!(
        "protocol bgp '{}' from jn_peer",
        protocol_name(&name)
    )));
}

#[test]
fn bgp_01_hold_time_0_writes_no_keepalive() {
    let mut intent = node_a();
    intent.peers[0].hold_time = 0;
    let text = rendered(&intent);
    assert!(text.contains("  hold time 0;\n  bfd off;\n"));
}

#[test]
fn bgp_01_intents_bird_would_refuse_are_refused() {
    type Edit = fn(&mut Peer);
    let cases: Vec<(Edit, &str)> = vec![
        (|p| p.name = "a b".into(), "holds only"),
        (|p| p.my_asn = 0, "AS 0"),
        (|p| p.peer_asn = u32::MAX, "AS 4294967295"),
        (|p| p.peer_port = 0, "port 0"),
        (|p| p.hold_time = 2, "hold time 2"),
        (
            |p| {
                p.bfd = Some(Bfd {
                    interval_ms: 100,
                    multiplier: 0,
                })
            },
            "BFD",
        ),
    ];
    for (edit, words) in cases {
        let mut intent = node_a();
        edit(&mut intent.peers[0]);
        let err = render(&intent).expect_err(words).to_string();
        assert!(err.contains(words), "{err} lacks {words}");
    }
    let mut twice = node_a();
    twice.peers.push(upstream());
    assert_eq!(
        render(&twice),
        Err(RenderError::DuplicatePeer("upstream".into()))
    );
}

#[test]
fn bgp_01_a_newline_in_a_comment_stays_in_the_comment() {
    let mut intent = node_a();
    intent.prefixes = vec![announce("10.1.0.0/16", "evil\nprotocol kernel {}")];
    let text = rendered(&intent);
    assert!(text.contains("# evil protocol kernel {}\n"));
}

/// Parses the rendered files with the real BIRD (`-p`: parse and exit, no socket, no
/// pid file, no daemon). Skipped where bird is not installed.
#[test]
fn bgp_01_bird_parses_the_rendered_file() {
    let bird = Path::new("/usr/sbin/bird");
    if !bird.exists() {
        eprintln!("skipped: no {}", bird.display());
        return;
    }
    let dir = std::env::temp_dir().join(format!("jn-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut long = node_a();
    long.peers
        .push(peer(&"d".repeat(80), Ipv4Addr::new(10, 99, 0, 7), None));
    long.peers[0].hold_time = 0;
    for (i, intent) in [node_a(), long].iter().enumerate() {
        let file = dir.join(format!("bird-{i}.conf"));
        std::fs::write(&file, rendered(intent)).expect("write");
        let out = Command::new(bird)
            .arg("-p")
            .arg("-c")
            .arg(&file)
            .output()
            .expect("runs bird -p");
        assert!(
            out.status.success(),
            "bird -p refused {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
