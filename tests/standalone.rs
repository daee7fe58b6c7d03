//! Tier 4: the whole stack from a scenario file, as the README's demo runs it.
use std::process::Command;

#[test]
fn l2_28_l2_25_standalone_demo_scenario_runs_end_to_end_and_cleans_up() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO_BIN_EXE_juneau"))
        .current_dir(root)
        .args([
            "standalone",
            "--once",
            "--scenario",
            "scenarios/standalone/l2-demo.yaml",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "standalone failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Addresses from lab-net's cidr (gateway .1 reserved), none on cidr-less dhcp-net.
    assert!(
        stdout.contains("default/web.eth0         node-a   -        lab-net      10.70.0.2/24"),
        "{stdout}"
    );
    assert!(
        stdout.contains("default/dhcp-client.eth1 node-b   -        dhcp-net     -"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("0% packet loss").count(), 3, "{stdout}");
    let leftovers = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&leftovers.stdout).contains("jn-sa-"),
        "standalone left namespaces behind"
    );
}
