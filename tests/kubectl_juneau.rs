//! `kubectl-juneau bpf dump` reads a Node's pinned maps (L2-30, MX-03, EIP-25).
use std::process::Command;

mod common;

use aya::programs::{TestRun, TestRunOptions};
use juneau::node::dataplane::{PortKind, PortSpec, Whole};

#[test]
fn l2_30_bpf_dump_l2_fdb_shows_what_the_datapath_learned() {
    let node = format!("jn-clitest-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let mut dp = Whole::load(Some(&root)).unwrap();
    for (ifindex, vni) in [(40, 777), (41, 777), (42, 888)] {
        dp.configure_port(PortSpec {
            ifindex,
            vni,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Switched,
        })
        .unwrap();
    }
    // A frame from 02:00:00:00:aa:01 on port 40 teaches the table (the datapath writes it).
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0xaa, 0x01, 0x88, 0xb5]);
    frame.resize(60, 0);
    let mut ctx = [0u8; 40];
    ctx[36..].copy_from_slice(&40u32.to_ne_bytes());
    dp.l2_port_program()
        .test_run(TestRunOptions {
            data_in: Some(&frame),
            ctx_in: Some(&ctx),
            repeat: 1,
            ..Default::default()
        })
        .unwrap();
    let dump = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
            .args(args)
            .output()
            .unwrap()
    };
    // `kubectl-juneau bpf dump l2_fdb --node <node>` and `rest`.
    let fdb = |rest: &[&str]| {
        let mut args = vec!["bpf", "dump", "l2_fdb", "--node", &node];
        args.extend(rest);
        dump(&args)
    };
    let out = fdb(&["--inner-key", "vni=777", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["mac"], "02:00:00:00:aa:01");
    assert_eq!(rows[0]["ifindex"], 40);
    assert_eq!(rows[0]["vtep"], "");
    let table = fdb(&["--inner-key", "vni=777"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("MAC"), "{text}");
    let row: Vec<&str> = text
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..4],
        ["02:00:00:00:aa:01", "40", "-", "-"],
        "MAC, ifindex, port (no daemon namespace to name it), VTEP: {text}"
    );
    let other = fdb(&["--inner-key", "vni=888", "-o", "json"]);
    assert_eq!(
        String::from_utf8_lossy(&other.stdout).trim(),
        "[]",
        "another segment's table is its own"
    );
    let missing = fdb(&[]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("add --inner-key vni=<VNI>"));
    let unknown = fdb(&["--inner-key", "vni=999"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no segment with VNI 999"));
    drop(dp);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn mx_03_bpf_dump_drops_counts_each_drop_under_its_reason() {
    let node = format!("jn-clidrops-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let dp = Whole::load(Some(&root)).unwrap();
    let drops = || {
        let rows: Vec<(String, u64)> = serde_json::from_value(common::kubectl_juneau_json(&[
            "bpf", "dump", "drops", "--node", &node,
        ]))
        .unwrap();
        rows.into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let before = drops();
    assert!(
        before.contains_key("NOT_A_PORT") && before.contains_key("HAIRPIN"),
        "{before:?}"
    );
    // Three frames from an interface that is no port (ifindex 77).
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0xaa, 0x02, 0x88, 0xb5]);
    frame.resize(60, 0);
    let mut ctx = [0u8; 40];
    ctx[36..].copy_from_slice(&77u32.to_ne_bytes());
    dp.l2_port_program()
        .test_run(TestRunOptions {
            data_in: Some(&frame),
            ctx_in: Some(&ctx),
            repeat: 3,
            ..Default::default()
        })
        .unwrap();
    let after = drops();
    assert_eq!(after["NOT_A_PORT"], before["NOT_A_PORT"] + 3, "{after:?}");
    assert_eq!(
        after["HAIRPIN"], before["HAIRPIN"],
        "other reasons unchanged"
    );
    let table = Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
        .args(["bpf", "dump", "drops", "--node", &node])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["NOT_A_PORT", &after["NOT_A_PORT"].to_string()]),
        "{text}"
    );
    drop(dp);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn l2_13_bpf_dump_shows_the_routers_segments_routes_neighbours_and_counters() {
    use juneau::node::gateway::{GatewaySegment, Neighbour, RouteSpec, RouterState};
    use juneau_common::gw::{ROUTE_CONNECTED, ROUTE_ENDPOINT, ROUTE_UNSUPPORTED};
    let node = format!("jn-cligw-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let mut dp = Whole::load(Some(&root)).unwrap();
    let mac = [0x02, 0x4a, 0x4e, 0, 0, 7];
    let route = |dst: &str, kind: u32| RouteSpec {
        dst: dst.parse().unwrap(),
        kind,
        vni: if kind == ROUTE_UNSUPPORTED { 0 } else { 7 },
        gw_ip: "10.7.0.1".parse().unwrap(),
        gw_mac: mac,
        mtu: 1450,
        nh_ip: if kind == ROUTE_ENDPOINT {
            "10.7.0.9".parse().unwrap()
        } else {
            std::net::Ipv4Addr::UNSPECIFIED
        },
    };
    let state = RouterState {
        segments: [(
            7,
            GatewaySegment {
                gw_ip: "10.7.0.1".parse().unwrap(),
                gw_mac: mac,
                mtu: 1450,
                prefix_len: 24,
                table: "main".into(),
                services: true,
                provider: true,
                acl: 0,
            },
        )]
        .into_iter()
        .collect(),
        tables: [(
            "main".to_owned(),
            [
                route("10.7.0.0/24", ROUTE_CONNECTED),
                route("0.0.0.0/0", ROUTE_UNSUPPORTED),
                route("192.168.50.0/24", ROUTE_ENDPOINT),
            ]
            .into_iter()
            .collect(),
        )]
        .into_iter()
        .collect(),
        neighbours: [(
            (7, "10.7.0.2".parse().unwrap()),
            Neighbour {
                mac: [2, 0, 0, 0, 0, 2],
                vtep: "10.99.0.2".parse().unwrap(),
            },
        )]
        .into_iter()
        .collect(),
    };
    dp.sync_router(&state).unwrap();
    let dump = |map: &str| common::kubectl_juneau_json(&["bpf", "dump", map, "--node", &node]);
    let segs = dump("gw_seg");
    assert_eq!(segs[0]["vni"], 7, "{segs}");
    assert_eq!(segs[0]["gateway"], "10.7.0.1");
    assert_eq!(segs[0]["gateway_mac"], "02:4a:4e:00:00:07");
    let routes = dump("gw_routes");
    let got: Vec<String> = routes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r["dst"].as_str().unwrap(),
                r["kind"].as_str().unwrap(),
                r["next_hop"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "0.0.0.0/0 unsupported -",
            "10.7.0.0/24 connected -",
            "192.168.50.0/24 endpoint 10.7.0.9"
        ],
        "{routes}"
    );
    let nbr = dump("gw_nbr");
    assert_eq!(nbr[0]["address"], "10.7.0.2", "{nbr}");
    assert_eq!(nbr[0]["mac"], "02:00:00:00:00:02");
    assert_eq!(nbr[0]["vtep"], "10.99.0.2");
    assert_eq!(nbr[0]["source"], "seeded");
    let stats: Vec<(String, u64)> = serde_json::from_value(dump("gw_stats")).unwrap();
    assert!(stats.contains(&("ROUTED".to_owned(), 0)), "{stats:?}");
    drop(dp);
    let _ = std::fs::remove_dir_all(root);
}

/// `kubectl-juneau <args>`: its status, stdout and stderr.
fn kubectl_juneau(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The data rows of a table, split into columns.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn eip_25_bpf_dump_elastic_ip_direct_shows_every_holder() {
    use juneau::node::dataplane::Holder;
    let node = format!("jn-clieip-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let mut dp = Whole::load(Some(&root)).unwrap();
    let holder = |last: u8, vni: u32, vtep: [u8; 4]| Holder {
        mac: [0x02, 0, 0, 0, 0x51, last],
        vni,
        node: vtep.into(),
        pod_ip: None,
    };
    let eips = [
        ("10.225.51.8", holder(8, 4097, [10, 99, 0, 1])),
        ("10.225.51.6", holder(6, 4097, [10, 99, 0, 2])),
        ("10.225.52.1", holder(1, 4098, [10, 99, 0, 1])),
    ]
    .into_iter()
    .map(|(a, h)| (a.parse().unwrap(), h))
    .collect();
    assert_eq!(dp.set_elastic_ips(&eips).unwrap(), 3);
    let dump = |rest: &[&str]| {
        let mut args = vec!["bpf", "dump", "elastic_ip_direct", "--node", &node];
        args.extend(rest);
        kubectl_juneau(&args)
    };
    let (ok, text, err) = dump(&["--filter", "addr=10.225.51.8"]);
    assert!(ok, "{err}");
    assert!(
        text.lines()
            .next()
            .is_some_and(|h| h.split_whitespace().collect::<Vec<_>>()
                == ["NODE", "ADDR", "NETWORK_ID", "MAC", "VTEP"]),
        "{text}"
    );
    assert_eq!(
        table_rows(&text),
        [[
            node.as_str(),
            "10.225.51.8",
            "4097",
            "02:00:00:00:51:08",
            "10.99.0.1"
        ]],
        "{text}"
    );
    let all = common::kubectl_juneau_json(&["bpf", "dump", "jn_eip_direct", "--node", &node]);
    let got: Vec<String> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["node"], node.as_str(), "{r}");
            format!(
                "{} {} {} {}",
                r["addr"].as_str().unwrap(),
                r["network_id"],
                r["mac"].as_str().unwrap(),
                r["vtep"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "10.225.51.6 4097 02:00:00:00:51:06 10.99.0.2",
            "10.225.51.8 4097 02:00:00:00:51:08 10.99.0.1",
            "10.225.52.1 4098 02:00:00:00:51:01 10.99.0.1",
        ],
        "every direct ElasticIP, by address: {all}"
    );
    let other = common::kubectl_juneau_json(&[
        "bpf",
        "dump",
        "elastic_ip_direct",
        "--node",
        &node,
        "--filter",
        "network_id=4098",
    ]);
    assert_eq!(other.as_array().unwrap().len(), 1, "{other}");
    assert_eq!(other[0]["addr"], "10.225.52.1");
    let (ok, text, _) = dump(&["--filter", "addr=10.225.51.9"]);
    assert!(ok && table_rows(&text).is_empty(), "{text}");
    let (ok, _, err) = dump(&["--filter", "ifindex=23"]);
    assert!(
        !ok && err.contains("elastic_ip_direct filters on addr, network_id"),
        "{err}"
    );
    let (ok, _, err) = kubectl_juneau(&[
        "bpf",
        "dump",
        "drops",
        "--node",
        &node,
        "--filter",
        "addr=1.2.3.4",
    ]);
    assert!(!ok && err.contains("drops takes no --filter"), "{err}");
    let (ok, _, err) = kubectl_juneau(&["bpf", "dump", "arp", "--node", &node]);
    assert!(
        !ok && err.contains(
            "elastic_ip_direct, external_arp_table, ifindex_external_network, ifindex_host_mac, arp_table, fdb, external_address_pools"
        ),
        "the error names every dumpable map: {err}"
    );
    drop(dp);
    let _ = std::fs::remove_dir_all(root);
}

/// The views seed 003's troubleshooting reads, from a Node that holds 10.225.51.8 on
/// its port 50 and knows 10.225.51.6 held on the Node 10.99.0.2.
#[test]
fn eip_25_the_seeds_views_arp_table_fdb_and_external_address_pools() {
    use juneau::node::dataplane::{Holder, PortKind};
    let node = format!("jn-cliview-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let mut dp = Whole::load(Some(&root)).unwrap();
    let mac = |last: u8| {
        if last == 0 {
            [0; 6]
        } else {
            [0x02, 0, 0, 0, 0x51, last]
        }
    };
    dp.configure_port(PortSpec {
        ifindex: 50,
        vni: 4097,
        mtu: 0,
        peer: true,
        security_groups: false,
        kind: PortKind::ElasticIp {
            mac: mac(8),
            ip: "10.225.51.8".parse().unwrap(),
        },
    })
    .unwrap();
    // .9 is allocated, held by nobody (no MAC, no Node).
    let eips = [
        ("10.225.51.8", 8, [10, 99, 0, 1]),
        ("10.225.51.6", 6, [10, 99, 0, 2]),
        ("10.225.51.9", 0, [0, 0, 0, 0]),
    ]
    .into_iter()
    .map(|(a, last, vtep)| {
        let h = Holder {
            mac: mac(last),
            vni: 4097,
            node: vtep.into(),
            pod_ip: None,
        };
        (a.parse().unwrap(), h)
    })
    .collect();
    dp.set_elastic_ips(&eips).unwrap();
    let dump = |map: &str, filters: &[&str]| {
        let mut args = vec!["bpf", "dump", map, "--node", &node];
        for f in filters {
            args.extend(["--filter", f]);
        }
        let (ok, text, err) = kubectl_juneau(&args);
        assert!(ok, "{map}: {err}");
        table_rows(&text)
    };
    assert_eq!(
        dump("arp_table", &["subnet_id=4097", "ipaddr=10.225.51.8"]),
        [[
            node.as_str(),
            "4097",
            "10.225.51.8",
            "02:00:00:00:51:08",
            "elastic_ip"
        ]]
    );
    // Here the holder's veth; the other holder behind its Node's VTEP.
    assert_eq!(
        dump("fdb", &["subnet_id=4097"]),
        [
            [node.as_str(), "4097", "02:00:00:00:51:08", "50", "-"],
            [node.as_str(), "4097", "02:00:00:00:51:06", "0", "10.99.0.2"],
        ]
    );
    let (ok, _, err) = kubectl_juneau(&["bpf", "dump", "fdb", "--node", &node]);
    assert!(!ok && err.contains("--filter subnet_id="), "{err}");
    // The entries themselves: the local holder's port, 0 for the others.
    let all = common::kubectl_juneau_json(&["bpf", "dump", "elastic_ip_direct", "--node", &node]);
    let ports: Vec<(String, u64)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["addr"].as_str().unwrap().to_owned(),
                r["ifindex"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("10.225.51.6".to_owned(), 0),
            ("10.225.51.8".to_owned(), 50),
            ("10.225.51.9".to_owned(), 0)
        ]
    );
    assert_eq!(
        dump("arp_table", &["ipaddr=10.225.51.9"]),
        [[
            node.as_str(),
            "4097",
            "10.225.51.9",
            "00:00:00:00:00:00",
            "no_holder"
        ]]
    );
    assert_eq!(
        dump("external_address_pools", &["addr=10.225.51.9"]),
        [[node.as_str(), "32", "10.225.51.9", "NO_HOLDER_DROPPED"]]
    );
    assert_eq!(
        dump("external_address_pools", &["addr=10.225.51.6"]),
        [[
            node.as_str(),
            "32",
            "10.225.51.6",
            "EXTERNAL_ADDRESS_DELIVERED_HERE"
        ]]
    );
    drop(dp);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn eip_25_bpf_dump_external_arp_table_lists_what_this_node_answers() {
    let node = format!("jn-cliarp-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let mut dp = Whole::load(Some(&root)).unwrap();
    let uplink = [0x02, 0x75, 0x6c, 0, 0, 1];
    let answers = ["10.225.32.241", "10.225.32.240"]
        .into_iter()
        .map(|a| (a.parse().unwrap(), uplink))
        .collect();
    assert_eq!(dp.set_arp_answers(&answers).unwrap(), 2);
    let dump = |rest: &[&str]| {
        let mut args = vec!["bpf", "dump", "external_arp_table", "--node", &node];
        args.extend(rest);
        kubectl_juneau(&args)
    };
    let (ok, text, err) = dump(&[]);
    assert!(ok, "{err}");
    assert!(text.starts_with("ADDR"), "{text}");
    assert_eq!(
        table_rows(&text),
        [
            ["10.225.32.240", "02:75:6c:00:00:01"],
            ["10.225.32.241", "02:75:6c:00:00:01"]
        ],
        "{text}"
    );
    let one = common::kubectl_juneau_json(&[
        "bpf",
        "dump",
        "jn_ext_arp",
        "--node",
        &node,
        "--filter",
        "addr=10.225.32.241",
    ]);
    assert_eq!(
        one,
        serde_json::json!([{"addr": "10.225.32.241", "mac": "02:75:6c:00:00:01"}])
    );
    // An address given up is no longer answered, and the dump says so.
    let fewer = [("10.225.32.240".parse().unwrap(), uplink)].into();
    assert_eq!(dp.set_arp_answers(&fewer).unwrap(), 1);
    let (ok, text, _) = dump(&["--filter", "addr=10.225.32.241"]);
    assert!(ok && table_rows(&text).is_empty(), "{text}");
    drop(dp);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn eip_25_bpf_dump_ifindex_external_network_shows_the_direct_nics_ports() {
    use juneau::node::dataplane::PortKind;
    let node = format!("jn-cliport-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let mut dp = Whole::load(Some(&root)).unwrap();
    let routed = |ip: &str, eip: bool| {
        let (mac, ip) = ([0x02, 0, 0, 0, 0x23, u8::from(eip)], ip.parse().unwrap());
        if eip {
            PortKind::ElasticIp { mac, ip }
        } else {
            PortKind::Subnet { mac, ip }
        }
    };
    // A direct NIC (23), a Subnet NIC (24) and an L2Network NIC (25): only the first is
    // on an ExternalNetwork.
    for (ifindex, vni, routed) in [
        (23, 4097, routed("10.225.51.8", true)),
        (24, 7, routed("10.7.0.9", false)),
        (25, 777, PortKind::Switched),
    ] {
        dp.configure_port(PortSpec {
            ifindex,
            vni,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: routed,
        })
        .unwrap();
    }
    let dump = |map: &str, rest: &[&str]| {
        let mut args = vec!["bpf", "dump", map, "--node", &node];
        args.extend(rest);
        kubectl_juneau(&args)
    };
    let (ok, text, err) = dump("ifindex_external_network", &[]);
    assert!(ok, "{err}");
    assert!(
        text.lines()
            .next()
            .is_some_and(|h| h.split_whitespace().collect::<Vec<_>>()
                == ["IFINDEX", "NETWORK_ID", "IPV4", "HOST_MAC"]),
        "no NODE column: {text}"
    );
    // The host MAC is the network's gateway MAC, 02:6a + networkID 4097 (0x1001).
    assert_eq!(
        table_rows(&text),
        [["23", "4097", "10.225.51.8", "02:6a:00:00:10:01"]],
        "{text}"
    );
    let json = common::kubectl_juneau_json(&[
        "bpf",
        "dump",
        "ifindex_external_network",
        "--node",
        &node,
        "--filter",
        "ifindex=23",
    ]);
    assert_eq!(
        json,
        serde_json::json!([{
            "ifindex": 23,
            "network_id": 4097,
            "ipv4": "10.225.51.8",
            "host_mac": "02:6a:00:00:10:01"
        }])
    );
    let (ok, text, _) = dump("ifindex_external_network", &["--filter", "ifindex=24"]);
    assert!(ok && table_rows(&text).is_empty(), "a Subnet NIC: {text}");
    let (ok, text, err) = dump("ifindex_host_mac", &["--filter", "ifindex=23"]);
    assert!(ok, "{err}");
    assert_eq!(table_rows(&text), [["23", "02:6a:00:00:10:01"]], "{text}");
    // A port taken away leaves the dump.
    dp.remove_port(23).unwrap();
    let (ok, text, _) = dump("ifindex_external_network", &[]);
    assert!(ok && table_rows(&text).is_empty(), "{text}");
    drop(dp);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn svc_01_bpf_dump_services_backends_and_conntrack_show_what_the_maps_hold() {
    use juneau::node::services::{Frontend, FrontendKey, ServiceState};
    use juneau_common::ct::{CT_ESTABLISHED, CT_F_REPLY, CT_F_SERVICE, CtEntry, CtKey};
    let node = format!("jn-clisvc-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let _ = std::fs::remove_dir_all(&root);
    // The pins go by name also when an assertion fails.
    struct Unpin(std::path::PathBuf);
    impl Drop for Unpin {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _unpin = Unpin(root.clone());
    let mut dp = Whole::of(juneau::node::Dataplane::load_sized(Some(&root), 64).unwrap()).unwrap();
    let dns: std::net::Ipv4Addr = "10.96.0.10".parse().unwrap();
    let backend: std::net::Ipv4Addr = "10.0.3.11".parse().unwrap();
    let want = ServiceState {
        frontends: [
            (
                FrontendKey {
                    ip: dns,
                    port: 53,
                    proto: 17,
                },
                Frontend {
                    backends: vec![(backend, 5353)],
                    affinity_s: None,
                },
            ),
            (
                FrontendKey {
                    ip: "10.96.0.1".parse().unwrap(),
                    port: 443,
                    proto: 6,
                },
                Frontend {
                    backends: vec![("10.0.3.12".parse().unwrap(), 6443)],
                    affinity_s: Some(10_800),
                },
            ),
        ]
        .into(),
        ..Default::default()
    };
    dp.sync_services(&want).unwrap();
    // A connection's pair, as the datapath writes it.
    let raw = |a: std::net::Ipv4Addr| u32::from_ne_bytes(a.octets());
    let client: std::net::Ipv4Addr = "10.0.3.10".parse().unwrap();
    let fwd = CtKey {
        zone: 12,
        saddr: raw(client),
        daddr: raw(dns),
        sport: 40000u16.to_be(),
        dport: 53u16.to_be(),
        proto: 17,
        pad0: 0,
        pad1: 0,
    };
    let entry = CtEntry {
        last_seen_ns: juneau::node::dataplane::monotonic_coarse_ns(),
        state: CT_ESTABLISHED,
        flags: CT_F_SERVICE,
        service: 1,
        backend_ip: raw(backend),
        backend_port: 5353u16.to_be(),
        service_ip: raw(dns),
        service_port: 53u16.to_be(),
        ..CtEntry::default()
    };
    let rev = CtKey {
        saddr: raw(backend),
        daddr: raw(client),
        sport: 5353u16.to_be(),
        dport: 40000u16.to_be(),
        ..fwd
    };
    {
        let data =
            aya::maps::MapData::from_pin(dp.pins().unwrap().maps_dir().join("jn_ct")).unwrap();
        let mut ct: aya::maps::HashMap<_, CtKey, CtEntry> =
            aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
        ct.insert(fwd, entry, 0).unwrap();
        ct.insert(
            rev,
            CtEntry {
                flags: CT_F_SERVICE | CT_F_REPLY,
                ..entry
            },
            0,
        )
        .unwrap();
    }
    let dump = |map: &str, rest: &[&str]| {
        let mut args = vec!["bpf", "dump", map, "--node", &node];
        args.extend(rest);
        kubectl_juneau(&args)
    };
    let (ok, text, err) = dump("services", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text),
        [
            ["10.96.0.1", "443", "tcp", "1", "1", "10800s"],
            ["10.96.0.10", "53", "udp", "2", "1", "-"],
        ]
    );
    let (ok, text, err) = dump("backends", &["--filter", "addr=10.0.3.11"]);
    assert!(ok, "{err}");
    assert_eq!(table_rows(&text), [["2", "10.0.3.11", "5353", "pod"]]);
    let (ok, text, err) = dump("conntrack", &["--filter", "addr=10.96.0.10"]);
    assert!(ok, "{err}");
    let rows = table_rows(&text);
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!(
        rows[0][..7],
        [
            "12",
            "udp",
            "10.0.3.10:40000",
            "10.96.0.10:53",
            "original",
            "established",
            "10.0.3.11:5353"
        ]
    );
    assert_eq!(rows[1][4..7], ["reply", "established", "10.96.0.10:53"]);
    let (ok, text, _) = dump("conntrack", &["--filter", "addr=10.9.9.9"]);
    assert!(ok);
    assert!(table_rows(&text).is_empty(), "filtered out: {text}");
    let (ok, _, err) = dump("conntrack", &["--filter", "port=53"]);
    assert!(!ok && err.contains("conntrack filters on addr"), "{err}");
    drop(dp);
}

#[test]
fn pol_03_dump_policy_shows_the_sets_nics_counters_and_connections_policy_bits() {
    use juneau::node::policy::{Compiled, PolicyState, compile};
    use juneau_common::{
        ct::{CtEntry, CtKey},
        policy::{POL_F_EGRESS, PolCounters, SET_ACL, SET_PENDING, SET_SG},
    };
    let node = format!("jn-clipol-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let _ = std::fs::remove_dir_all(&root);
    struct Unpin(std::path::PathBuf);
    impl Drop for Unpin {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _unpin = Unpin(root.clone());
    let mut dp = Whole::of(juneau::node::Dataplane::load_sized(Some(&root), 64).unwrap()).unwrap();
    // Set 7: a NetworkACL, ingress two rules, egress omitted (open); set 12: a
    // SecurityGroup with one ingress rule and egress omitted.
    let rules: Vec<juneau::api::networkacl::AclRule> = serde_json::from_value(serde_json::json!([
        {"priority": 10, "action": "deny", "protocol": "tcp", "cidr": "10.0.2.0/24"},
        {"priority": 20, "action": "allow", "protocol": "all", "cidr": ""},
    ]))
    .unwrap();
    let (ingress, p) = compile::acl_direction(Some(&rules));
    assert!(p.is_none(), "{p:?}");
    let (egress, _) = compile::acl_direction(None);
    let acl = Compiled {
        kind: SET_ACL,
        version: 3,
        dirs: [ingress.clone(), egress.clone()],
    };
    let sg = Compiled {
        kind: SET_SG,
        version: 1,
        dirs: [
            compile::Direction {
                open: false,
                rules: ingress.rules[1..].to_vec(),
            },
            egress,
        ],
    };
    let nic = |a: &str| (21, a.parse::<std::net::Ipv4Addr>().unwrap());
    let want = PolicyState {
        sets: [(7, acl), (12, sg)].into(),
        nics: [
            (nic("10.0.1.10"), [12, 0]),
            (nic("10.0.1.11"), [12, SET_PENDING]),
        ]
        .into(),
    };
    let epoch = dp.policy.sync(&want).unwrap().epoch;
    assert!(epoch > 0);
    let maps = dp.pins().unwrap().maps_dir();
    // The datapath's counters, as its two CPUs would leave them: set 7 ingress.
    {
        let data = aya::maps::MapData::from_pin(maps.join("jn_pol_stats")).unwrap();
        let mut stats: aya::maps::PerCpuArray<_, PolCounters> =
            aya::maps::PerCpuArray::try_from(aya::maps::Map::PerCpuArray(data)).unwrap();
        let cpus = aya::util::nr_cpus().unwrap();
        let mut values = vec![PolCounters::default(); cpus];
        values[0] = PolCounters {
            allowed: 4,
            denied_by_rule: 2,
            denied_no_match: 0,
        };
        values[cpus - 1].allowed += 1;
        stats
            .set(7 * 2, aya::maps::PerCpuValues::try_from(values).unwrap(), 0)
            .unwrap();
    }
    // A connection's original entry, allowed on egress under this epoch.
    {
        let data = aya::maps::MapData::from_pin(maps.join("jn_ct")).unwrap();
        let mut ct: aya::maps::HashMap<_, CtKey, CtEntry> =
            aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
        let raw = |a: [u8; 4]| u32::from_ne_bytes(a);
        ct.insert(
            CtKey::new(
                21,
                raw([10, 0, 1, 10]),
                raw([10, 0, 2, 12]),
                40000u16.to_be(),
                80u16.to_be(),
                6,
            ),
            CtEntry {
                last_seen_ns: juneau::node::dataplane::monotonic_coarse_ns(),
                policy: POL_F_EGRESS,
                policy_version: epoch,
                ..CtEntry::default()
            },
            0,
        )
        .unwrap();
    }
    let dump = |map: &str, rest: &[&str]| {
        let mut args = vec!["bpf", "dump", map, "--node", &node];
        args.extend(rest);
        kubectl_juneau(&args)
    };
    let e = epoch.to_string();
    let (ok, text, err) = dump("policy", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text),
        [
            ["7", "acl", "3", "14", "2", "open", "5/0", "2/0", "0/0", &e],
            ["12", "sg", "1", "24", "1", "open", "0/0", "0/0", "0/0", &e],
        ],
        "{text}"
    );
    let (ok, text, err) = dump("jn_pol_set", &["--filter", "kind=sg"]);
    assert!(ok, "{err}");
    assert_eq!(table_rows(&text).len(), 1, "{text}");
    assert_eq!(table_rows(&text)[0][0], "12", "{text}");
    let rows = common::kubectl_juneau_json(&[
        "bpf", "dump", "policy", "--node", &node, "--filter", "set=7",
    ]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["ingress"]["allowed"], 5, "{rows}");
    assert_eq!(rows[0]["ingress"]["denied_by_rule"], 2, "{rows}");
    assert_eq!(rows[0]["egress"]["open"], true, "{rows}");
    let (ok, text, err) = dump("policy-nics", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text),
        [
            ["21", "10.0.1.10", "12", &e],
            ["21", "10.0.1.11", "12,pending", &e],
        ],
        "{text}"
    );
    let (ok, text, _) = dump("policy_nics", &["--filter", "addr=10.0.1.11"]);
    assert!(ok);
    assert_eq!(table_rows(&text).len(), 1, "{text}");
    let (ok, text, err) = dump("conntrack", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text)[0].last().map(String::as_str),
        Some(format!("egress@{epoch}").as_str()),
        "{text}"
    );
    let (ok, _, err) = dump("policy", &["--filter", "addr=10.0.1.10"]);
    assert!(!ok && err.contains("policy filters on set, kind"), "{err}");
    drop(dp);
}
