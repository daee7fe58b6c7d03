//! What outlives the daemon (MX-03): attachments read from the kernel, a layout change
//! migrated.
use super::*;

#[test]
fn mx_03_attachments_come_from_the_kernel_and_outlive_the_daemon_a_layout_change_migrates() {
    use std::os::unix::fs::PermissionsExt;
    let mut run = start(&["at-a"]);
    let mode = std::fs::metadata(run.store_socket())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the store socket is root's only");
    run.add_pod(&pod("at-p", "at-a")).unwrap();
    run.add_pod(&pod("at-q", "at-a")).unwrap();
    let q = address(&run, "at-q");
    let ns = run.node_ns("at-a").unwrap().path().to_owned();
    // A second daemon for the same Node is refused while the first runs.
    let second = Command::new("ip")
        .args(["netns", "exec", run.node_ns("at-a").unwrap().name()])
        .arg(env!("CARGO_BIN_EXE_juneau"))
        .args([
            "node",
            "--node-name",
            "at-a",
            "--underlay",
            "ul0",
            "--metrics-addr",
            "off",
        ])
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("another juneau node serves this Node already"),
        "{err}"
    );

    let port_programs = |rows: &[serde_json::Value]| -> Vec<u64> {
        rows.iter()
            .filter(|r| r["program"] == "port_ingress")
            .map(|r| r["program_id"].as_u64().unwrap())
            .collect()
    };
    let old_layout = port_programs(&attachments("at-a"));
    run.daemons.stop("at-a");
    // No daemon, no records to read: the kernel still runs the programs.
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
        .args(["attachments", "--netns"])
        .arg(&ns)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("INTERFACE"), "{text}");
    let port = text
        .lines()
        .find(|l| l.contains("at-p.eth0"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        port.contains("tc/ingress") && port.contains("port_ingress"),
        "{port}"
    );
    assert!(text.contains("overlay_ingress"), "{text}");
    assert_eq!(
        ping(&run, "at-p", &q, &["-c", "2", "-i", "0.2"]),
        (2, 2),
        "forwarding without a daemon"
    );
    let err = Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
        .args(["attachments", "--node", "at-a"])
        .output()
        .unwrap();
    assert!(!err.status.success());
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("is its daemon running?"),
        "{}",
        String::from_utf8_lossy(&err.stderr)
    );

    // A layout change: what is pinned now becomes "another version" (v0). The next
    // daemon builds fresh maps in its own folder, attaches every Pod NIC again from
    // the cluster, then removes the old folder (its links detach, its maps go).
    let root = juneau::standalone::pin_dir_of("at-a");
    let current = format!("v{}", juneau_common::LAYOUT_VERSION);
    std::fs::rename(root.join(&current), root.join("v0")).unwrap();
    run.daemons.start("at-a", Duration::from_secs(20)).unwrap();
    assert!(!root.join("v0").exists(), "the old layout's pins are gone");
    // The Node programs' TCX links are pinned in the new folder; Pod ports run tc
    // filters, which need no pin (counted from the kernel below).
    let mut pinned: Vec<String> = root
        .join(&current)
        .join("links")
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .map(|n| n.rsplit_once('-').unwrap().0.to_owned())
        .collect();
    pinned.sort();
    assert_eq!(pinned, ["overlay_ingress", "underlay_ingress"]);
    let rows = attachments("at-a");
    let ports = rows
        .iter()
        .filter(|r| r["program"] == "port_ingress")
        .count();
    assert_eq!(
        ports, 2,
        "each port attached once, by the new layout: {rows:?}"
    );
    // Both run the new daemon's program: none is left on the old layout's.
    let now = port_programs(&rows);
    assert!(
        now.iter()
            .all(|id| *id == now[0] && !old_layout.contains(id)),
        "{old_layout:?} -> {now:?}"
    );
    assert_eq!(
        ping(&run, "at-p", &q, &["-c", "2", "-i", "0.2"]),
        (2, 2),
        "after the migration"
    );
    run.teardown(&mut |_| {}).unwrap();
}
