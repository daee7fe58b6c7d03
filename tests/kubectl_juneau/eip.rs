//! The ElasticIP dumps and the seed's views (EIP-25).
use super::*;

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

/// EIP-14 in the seed's view: the announced prefixes after the direct ElasticIPs'
/// /32s, delivered here or elsewhere, also by the pinned map's own name; a filter
/// address shows the prefixes holding it.
#[test]
fn eip_14_external_address_pools_shows_the_prefixes_delivered_here_and_elsewhere() {
    use juneau::node::dataplane::Delivery;
    let node = format!("jn-clipools-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let mut dp = Whole::load(Some(&root)).unwrap();
    let want = [
        ("203.0.113.0/24", Delivery::Here),
        ("203.0.113.128/25", Delivery::Elsewhere),
    ]
    .into_iter()
    .map(|(n, d)| (n.parse().unwrap(), d))
    .collect();
    assert_eq!(dp.set_ext_pools(&want).unwrap(), 2);
    assert_eq!(
        dp.set_ext_pools(&want).unwrap(),
        0,
        "unchanged: nothing written"
    );
    let dump = |filters: &[&str]| {
        let mut args = vec!["bpf", "dump", "jn_ext_pools", "--node", &node];
        for f in filters {
            args.extend(["--filter", f]);
        }
        let (ok, text, err) = kubectl_juneau(&args);
        assert!(ok, "{err}");
        table_rows(&text)
    };
    let n = node.as_str();
    assert_eq!(
        dump(&[]),
        [
            [n, "24", "203.0.113.0", "EXTERNAL_ADDRESS_DELIVERED_HERE"],
            [
                n,
                "25",
                "203.0.113.128",
                "EXTERNAL_ADDRESS_DELIVERED_ELSEWHERE"
            ],
        ]
    );
    assert_eq!(
        dump(&["addr=203.0.113.10"]),
        [[n, "24", "203.0.113.0", "EXTERNAL_ADDRESS_DELIVERED_HERE"]]
    );
    // The pin is the map: a prefix given up is gone from the dump.
    let fewer = [("203.0.113.0/24".parse().unwrap(), Delivery::Here)].into();
    assert_eq!(dp.set_ext_pools(&fewer).unwrap(), 1);
    assert_eq!(
        dump(&["addr=203.0.113.130"]).len(),
        1,
        "only the /24 holds it now"
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
