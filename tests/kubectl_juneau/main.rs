//! `kubectl-juneau bpf dump` reads a Node's pinned maps (L2-30, MX-03, EIP-25).
use std::process::Command;

#[path = "../common/mod.rs"]
mod common;

use aya::programs::{TestRun, TestRunOptions};
use juneau::node::dataplane::{PortKind, PortSpec, Whole};

mod eip;
mod svc_pol;

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
    use juneau::features::router::gateway::{GatewaySegment, Neighbour, RouteSpec, RouterState};
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
