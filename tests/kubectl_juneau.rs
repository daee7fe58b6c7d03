//! `kubectl-juneau bpf dump l2_fdb` reads a Node's pinned maps (L2-30).
use std::process::Command;

use aya::programs::{TestRun, TestRunOptions};
use juneau::node::{Dataplane, dataplane::PortSpec};

#[test]
fn l2_30_bpf_dump_l2_fdb_shows_what_the_datapath_learned() {
    let node = format!("jn-clitest-{}", std::process::id());
    let dir = juneau::cli::node_dir(&node);
    let mut dp = Dataplane::load(Some(&dir)).unwrap();
    for (ifindex, vni) in [(40, 777), (41, 777), (42, 888)] {
        dp.configure_port(PortSpec {
            ifindex,
            vni,
            mtu: 0,
            peer: true,
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
    assert_eq!(row[..3], ["02:00:00:00:aa:01", "40", "-"], "{text}");
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
    let _ = std::fs::remove_dir_all(dir);
}
