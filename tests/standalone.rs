//! Tier 4: the whole stack from a scenario file, as the README's demo runs it.
use std::{process::Command, sync::Mutex};

mod common;

/// Standalone runs own the Node names of their scenario (sockets, pinned maps): one at
/// a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn l2_28_l2_25_standalone_demo_scenario_runs_end_to_end_and_cleans_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once("standalone failed");
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

#[test]
fn l2_13_l2_15_l2_18_l2_21_l2_09_gateway_scenario_routes_between_segments_and_nodes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/vpc-gateway.yaml",
        "the gateway scenario failed",
    );
    // Every step ran (the runner stops at the first failure; this guards the count).
    assert!(stdout.contains("step 24:"), "{stdout}");
    assert!(!stdout.contains("step 25:"), "{stdout}");
}

#[test]
fn l2_05_l2_14_l2_15_l2_21_subnet_scenario_routes_subnet_nics_through_the_datapath() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/vpc-subnets.yaml",
        "the Subnet scenario failed",
    );
    assert!(stdout.contains("step 25:"), "{stdout}");
    assert!(!stdout.contains("step 26:"), "{stdout}");
}

#[test]
fn svc_01_svc_03_pods_resolve_cluster_dns_and_reach_a_service_whose_backend_goes_mid_run_and_a_backend_reaches_itself()
 {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/services-dns.yaml",
        "the Services scenario failed",
    );
    assert!(stdout.contains("step 16:"), "{stdout}");
    assert!(!stdout.contains("step 17:"), "{stdout}");
    // The count of the requests made while the backend went, as the scenario said it
    // ("N answered, M failed; after: ..."). Parsed, not searched for: "10 failed"
    // contains "0 failed".
    assert!(stdout.contains("deleted pod web-1"), "{stdout}");
    let (answered, failed) = stdout
        .lines()
        .find_map(|l| {
            let (ok, rest) = l.trim().split_once(" answered, ")?;
            let (fail, _) = rest.split_once(" failed;")?;
            Some((ok.parse::<u32>().ok()?, fail.parse::<u32>().ok()?))
        })
        .unwrap_or_else(|| panic!("no count of the requests made while web-1 went: {stdout}"));
    assert_eq!(failed, 0, "requests failed while web-1 went: {stdout}");
    assert!(answered > 20, "too few requests while web-1 went: {stdout}");
}

#[test]
fn svc_02_pods_reach_node_address_backends_on_their_own_node_and_on_another() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/services-host.yaml",
        "the host-backend scenario failed",
    );
    assert!(stdout.contains("step 9:"), "{stdout}");
    assert!(!stdout.contains("step 10:"), "{stdout}");
}

#[test]
fn svc_02_l2_15_l2_27_two_overlapping_tenant_vpcs_resolve_cluster_dns_and_reach_default_vpc_backends_on_three_nodes()
 {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/services-tenants.yaml",
        "the tenant Services scenario failed",
    );
    assert!(stdout.contains("step 15:"), "{stdout}");
    assert!(!stdout.contains("step 16:"), "{stdout}");
}

#[test]
fn pol_01_pol_02_pol_03_l2_20_real_clients_are_allowed_and_denied_as_the_rules_say_across_nodes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with("scenarios/stack/policy.yaml", "the policy scenario failed");
    assert!(stdout.contains("step 15:"), "{stdout}");
    assert!(!stdout.contains("step 16:"), "{stdout}");
    assert!(stdout.contains("none denied"), "{stdout}");
}

#[test]
fn pol_01_pol_03_a_rule_change_on_the_stack_stops_what_it_no_longer_allows_and_keeps_the_rest() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/policy-change.yaml",
        "the policy change scenario failed",
    );
    assert!(stdout.contains("step 11:"), "{stdout}");
    assert!(!stdout.contains("step 12:"), "{stdout}");
    assert!(stdout.contains("applied NetworkACL data-acl"), "{stdout}");
    assert!(stdout.contains("6000 by none"), "{stdout}");
    assert!(stdout.contains("6000 resumed"), "{stdout}");
}

#[test]
fn eip_01_eip_08_eip_09_eip_10_eip_11_eip_13_eip_18_elastic_ips_on_pod_nics_are_reached_from_outside()
 {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/eip-arp.yaml",
        "the ElasticIP scenario failed",
    );
    assert!(stdout.contains("step 12:"), "{stdout}");
    assert!(!stdout.contains("step 13:"), "{stdout}");
}

/// A bgp ExternalNetwork end to end against a real FRR upstream: BIRD on every Node
/// announces the pool, the upstream installs three next hops, and a connection to
/// one ElasticIP through each of the three Nodes arrives (two of them carried to the
/// holder over VXLAN); the NATGateway's per-Node addresses are /32s of their Nodes;
/// a range pinned to node-b is delivered elsewhere by the others (EIP-14).
#[test]
fn eip_12_eip_14_bgp_01_bgp_02_nat_02_elastic_ips_on_three_nodes_are_reached_through_frr_ecmp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/eip-bgp.yaml",
        "the BGP ElasticIP scenario failed",
    );
    assert!(stdout.contains("speaks BGP (FRR, AS 64512)"), "{stdout}");
    assert!(stdout.contains("step 16:"), "{stdout}");
    assert!(!stdout.contains("step 17:"), "{stdout}");
}

#[test]
fn nat_03_pol_03_an_attached_elastic_ip_reaches_a_subnet_pod_from_outside_is_its_way_out_and_follows_it_to_another_node()
 {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/elastic-ip-attachment.yaml",
        "the ElasticIPAttachment scenario failed",
    );
    assert!(stdout.contains("step 28:"), "{stdout}");
    assert!(!stdout.contains("step 29:"), "{stdout}");
    assert!(
        stdout.contains(
            "default/web-eipa             10.99.0.110      10.50.0.2    node-a   Attached  True Attached"
        ),
        "{stdout}"
    );
}

#[test]
fn nat_01_nat_02_l2_15_pods_of_two_overlapping_vpcs_reach_the_outside_from_their_nodes_addresses() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stdout = once_with(
        "scenarios/stack/nat-gateway.yaml",
        "the NATGateway scenario failed",
    );
    assert!(stdout.contains("step 29:"), "{stdout}");
    assert!(!stdout.contains("step 30:"), "{stdout}");
    // One address per Node, from the pool's start, both Ready; both gateways Ready
    // on both Nodes.
    for want in [
        "ext-net-arp--node-a          node-a   10.99.0.100      True Assigned",
        "ext-net-arp--node-b          node-b   10.99.0.101      True Assigned",
        "a-out            tenant-a   ext-net-arp        2/2 True Reconciled",
        "b-out            tenant-b   ext-net-arp        2/2 True Reconciled",
        "default          default    ext-net-arp        2/2 True Reconciled",
    ] {
        assert!(stdout.contains(want), "{want:?} in {stdout}");
    }
}

#[test]
fn l2_28_l2_30_mx_03_standalone_runs_until_sigint_its_daemons_age_the_tables_then_it_tears_down() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (mut child, guard) = running(&["--fdb-aging", "2"]);
    let ours = |pid: u32| {
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        String::from_utf8_lossy(&list.stdout).contains(&format!("jn-sa-{pid}-"))
    };
    assert!(ours(child.id()), "while running, its namespaces exist");
    // L2-30 on the daemons: what the pings taught node-a's lab-net table (VNI 3) is
    // visible through kubectl-juneau, and gone once the 2 s aging time has passed.
    let dump = || {
        common::kubectl_juneau_json(&[
            "bpf",
            "dump",
            "l2_fdb",
            "--node",
            "node-a",
            "--inner-key",
            "vni=3",
        ])
        .as_array()
        .unwrap()
        .len()
    };
    // Traffic now (the scenario's own pings may have aged out already at 2 s): web on
    // node-a pings db on node-b; node-a learns both MACs.
    let web = format!("jn-sa-{}-0-default-web", child.id());
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            &web,
            "ping",
            "-c",
            "2",
            "-i",
            "0.2",
            "-W",
            "2",
            "10.70.0.3",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains("2 packets transmitted, 2 received"),
        "{}",
        String::from_utf8_lossy(&ping.stdout)
    );
    assert!(dump() >= 2, "node-a learned nothing from the pings");
    // The same run through `trace` (its store, node-a's maps): the path web -> db
    // crosses to node-b, and node-a's table holds db's MAC behind node-b's VTEP.
    let store = format!("/run/juneau/sa-{}-0/store.sock", child.id());
    let hops = common::kubectl_juneau_json(&["trace", "web", "db", "--store", &store]);
    let what: Vec<&str> = hops
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["what"].as_str().unwrap())
        .collect();
    let vtep = what
        .iter()
        .find_map(|w| w.strip_prefix("carried by VXLAN, VNI 3, to Node node-b (VTEP "))
        .unwrap_or_else(|| panic!("no VXLAN hop to node-b: {what:?}"));
    assert!(
        what.iter().any(|w| w.starts_with("l2_fdb: ")
            && w.ends_with(&format!("behind VTEP {}", &vtep[..vtep.len() - 1]))),
        "node-a's table does not hold db behind node-b: {what:?}"
    );
    let web_nics = common::kubectl_juneau_json(&["describe", "pod", "web", "--store", &store]);
    assert_eq!(web_nics["nics"][0]["network"], "L2Network lab-net (VNI 3)");
    // The Pods' neighbour probes refresh the entries once or twice after the pings;
    // after that the table must empty within the aging time plus a sweep.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while dump() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "entries outlived their 2 s aging time by far"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // SIGINT, as Ctrl-C sends it; only to the process this test started.
    drop(guard);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "standalone did not exit cleanly on SIGINT: {status}"
    );
    assert!(
        !ours(child.id()),
        "standalone left namespaces behind after SIGINT"
    );
    assert!(
        !std::path::Path::new("/run/juneau/node-a").exists(),
        "the daemon socket folder stayed"
    );
}

/// Sends SIGINT (Ctrl-C) to the standalone run this test started when dropped, also
/// when an assertion fails first, so a failing test never leaves it running.
struct Interrupt(u32);

impl Drop for Interrupt {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0 as i32),
            nix::sys::signal::Signal::SIGINT,
        );
    }
}

/// Processes whose command line mentions `needle` (the daemons of one run).
fn processes_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(needle).then_some(pid)
        })
        .collect()
}

/// `juneau standalone --once` on the demo scenario, which must succeed; its stdout.
fn once(what: &str) -> String {
    once_with("scenarios/stack/l2-demo.yaml", what)
}

/// `juneau standalone --once` on `scenario`, which must succeed; its stdout.
fn once_with(scenario: &str, what: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_juneau"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["standalone", "--once", "--scenario", scenario])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `juneau standalone` on the demo scenario with `extra` flags, once it says it runs;
/// the guard interrupts it when dropped.
fn running(extra: &[&str]) -> (std::process::Child, Interrupt) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_juneau"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("standalone")
        .args(extra)
        .args(["--scenario", "scenarios/stack/l2-demo.yaml"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let guard = Interrupt(child.id());
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let up = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.starts_with("running; Ctrl-C"));
    assert!(up, "standalone never reached its running state");
    // Keep reading what it says until it exits.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    (child, guard)
}

fn has_netns(prefix: &str) -> bool {
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&list.stdout).contains(prefix)
}

/// Starts a run, kills it with SIGKILL, checks what it leaves; returns its pid.
fn killed_run() -> u32 {
    let (mut child, guard) = running(&[]);
    let pid = child.id();
    let store = format!("/run/juneau/sa-{pid}-0/store.sock");
    assert_eq!(processes_with(&store).len(), 2, "one juneau node per Node");
    let programs = format!("/run/juneau/sa-{pid}-0/tmp/");
    assert_eq!(
        processes_with(&programs).len(),
        1,
        "the scenario's dnsmasq runs"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    std::mem::forget(guard);
    // Its daemons follow it (they were started with a parent-death signal).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !processes_with(&store).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "daemons outlived their run"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // So do the programs its scenario started in Pods (dnsmasq).
    while !processes_with(&programs).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the run's dnsmasq outlived it"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        has_netns(&format!("jn-sa-{pid}-")),
        "a killed run leaves its namespaces (what cleanup is for)"
    );
    assert!(std::path::Path::new("/sys/fs/bpf/juneau/node-a").exists());
    pid
}

fn nothing_left_of(pid: u32, text: &str) {
    assert!(
        !has_netns(&format!("jn-sa-{pid}-")),
        "namespaces left: {text}"
    );
    assert!(
        !std::path::Path::new(&format!("/run/juneau/sa-{pid}-0")).exists(),
        "{text}"
    );
    assert!(
        !std::path::Path::new(&format!("/run/juneau/standalone/{pid}-0.json")).exists(),
        "{text}"
    );
}

#[test]
fn mx_03_a_run_killed_with_sigkill_leaves_nothing_the_next_one_trips_on() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Cleaned by --cleanup...
    let pid = killed_run();
    let out = Command::new(env!("CARGO_BIN_EXE_juneau"))
        .args(["standalone", "--cleanup"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("run {pid} (killed) cleaned")),
        "{text}"
    );
    nothing_left_of(pid, &text);
    assert!(
        !std::path::Path::new("/sys/fs/bpf/juneau/node-a").exists(),
        "{text}"
    );
    assert!(
        !std::path::Path::new("/run/juneau/node-a").exists(),
        "{text}"
    );
    // ...and by the next run itself, straight after the kill.
    let pid = killed_run();
    let text = once("the next run trips");
    assert!(text.contains("removed what 1 killed run(s) left"), "{text}");
    nothing_left_of(pid, &text);
}

#[test]
fn l2_07_a_refused_scenario_object_is_named_and_nothing_is_built() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let demo = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/stack/l2-demo.yaml"
    ))
    .unwrap();
    let bad = demo.replace(
        "spec: {vpc: tenant-a, mtu: 1400}",
        "spec: {vpc: tenant-a, mtu: 1400, cidr: 10.0.1.5/24}",
    );
    assert_ne!(bad, demo, "the demo scenario changed; update this test");
    let path = std::env::temp_dir().join(format!("jn-bad-scenario-{}.yaml", std::process::id()));
    std::fs::write(&path, bad).unwrap();
    let runs = || -> Vec<String> {
        std::fs::read_dir("/run/juneau")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("sa-"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let child = Command::new(env!("CARGO_BIN_EXE_juneau"))
        .args(["standalone", "--once", "--scenario", path.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad scenario ran");
    assert!(
        stderr.contains(
            "objects[3] (L2Network \"dhcp-net\"): admission webhook denied the request: spec.cidr: 10.0.1.5/24 has host bits set; use 10.0.1.0/24"
        ),
        "{stderr}"
    );
    // Only this run's own folder counts: its start may clean up earlier killed runs'.
    assert!(
        !runs().iter().any(|r| r.starts_with(&format!("sa-{pid}-"))),
        "a run folder was made for a refused scenario"
    );
    assert!(!has_netns(&format!("jn-sa-{pid}-")), "namespaces were made");
}
