//! The BGP speaker across what happens to a Node (BGP-01), against a real FRR
//! upstream: a daemon killed with SIGKILL and started again withdraws nothing (the
//! speaker lives on and the new daemon adopts it: not one probe lost, the upstream
//! keeps three next hops throughout), and a Node taken off the underlay leaves the
//! upstream's route within BFD's time; each Node's BGPNodeState and `kubectl juneau
//! bgp status` say what their speaker says (BGP-03).
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
    time::{Duration, Instant},
};

mod common;

use juneau::{
    scenario::steps::Bed,
    standalone::{
        Options, Run, Scenario,
        frr::vtysh::{bfd_up, fib_next_hops},
    },
};

/// One bed at a time: BFD's 300 ms must not be measured on a starved machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const POOL: &str = "203.0.113.0/24";
const EIP: &str = "203.0.113.10";

/// The BGP scenario on Nodes `<p>-a`, `<p>-b`, `<p>-c` (names of this test's own, so
/// that no other test's pins or sockets are touched).
fn scenario(p: &str) -> Scenario {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/stack/eip-bgp.yaml"),
    )
    .unwrap()
    .replace("node-a", &format!("{p}-a"))
    .replace("node-b", &format!("{p}-b"))
    .replace("node-c", &format!("{p}-c"));
    let mut s: Scenario = serde_yaml_ng::from_str(&text).unwrap();
    s.steps.clear();
    s
}

fn start(p: &str) -> Run {
    let s = scenario(p);
    let mut run = Run::start(&s, &Options::default(), &mut |_| {}).expect("start");
    for pod in &s.pods {
        run.add_pod(pod).unwrap();
    }
    run
}

/// The upstream's installed next hops of the pool, by vtysh (FRR's own view).
fn next_hops(run: &Run) -> BTreeSet<String> {
    fib_next_hops(&frr_dir(run), POOL)
        .iter()
        .map(|a| a.to_string())
        .collect()
}

fn frr_dir(run: &Run) -> PathBuf {
    run.store_socket().parent().unwrap().join("frr")
}

fn wait_for_hops(run: &Run, n: usize, within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        if next_hops(run).len() == n {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "{n} next hops within {within:?}: {:?}",
            next_hops(run)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Node `node`'s BGPNodeState status as its daemon wrote it: (Ready, the session's
/// state, its last error).
fn node_state(run: &Run, node: &str) -> Option<(String, String, String)> {
    let (w, _) = run.store.read();
    let st = w
        .objects
        .bgp_node_states
        .iter()
        .find(|s| s.spec.node_name == node)?
        .status
        .clone()?;
    let ready = st
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
        .unwrap_or_default();
    let s = st.bgp_sessions.first()?;
    Some((ready, s.state.clone(), s.last_error.clone()))
}

fn wait_for_state(run: &Run, node: &str, f: impl Fn(&(String, String, String)) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = node_state(run, node);
        if s.as_ref().is_some_and(&f) {
            return;
        }
        assert!(Instant::now() < deadline, "{node}'s BGPNodeState: {s:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `cmd` in the namespace a step calls `at`.
fn exec(run: &Run, at: &str, cmd: &str) -> String {
    let ns = run.netns_name(at).unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns, "sh", "-c", cmd])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Node the upstream sends the client's pings to `EIP` through.
fn ping_node(run: &Run) -> String {
    let via = exec(
        run,
        "upstream",
        &format!("ip route get {EIP} from 198.51.100.10 iif ext0 ipproto icmp"),
    );
    let ip = via
        .split_whitespace()
        .skip_while(|w| *w != "via")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(ip.starts_with("10.99.0."), "{via}");
    ip
}

fn bird_pid(node: &str) -> String {
    let dir = juneau::node::daemon::bgp_dir_of(&juneau::standalone::socket_of(node));
    std::fs::read_to_string(dir.join("bird.pid")).unwrap_or_default()
}

#[test]
fn bgp_01_a_daemon_sigkill_loses_no_probe_and_the_upstream_keeps_its_routes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = start("bk");
    wait_for_hops(&run, 3, Duration::from_secs(30));
    // The daemon of the Node the probes go through is the one killed.
    let via = ping_node(&run);
    let i: usize = via.rsplit('.').next().unwrap().parse().unwrap();
    let node = ["bk-a", "bk-b", "bk-c"][i - 1];
    let speaker = bird_pid(node);
    assert!(!speaker.is_empty(), "{node} runs a speaker");
    let client = PathBuf::from("/run/netns").join(run.netns_name("client").unwrap());
    let probes = std::thread::spawn(move || {
        juneau::netns::run_in(&client, || {
            Command::new("ping")
                .args(["-n", "-q", "-i", "0.01", "-c", "400", "-W", "1", EIP])
                .output()
                .unwrap()
        })
        .unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    let old = common::sigkill_daemon(&run, node);
    // The upstream's view, every 50 ms, until the new daemon serves.
    let mut fewest = 3;
    let deadline = Instant::now() + Duration::from_secs(20);
    while run.daemons.pid(node).is_none_or(|p| p == old) {
        fewest = fewest.min(next_hops(&run).len());
        assert!(
            Instant::now() < deadline,
            "the daemon was not started again"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    common::wait_restarted(&run, node, old);
    for _ in 0..20 {
        fewest = fewest.min(next_hops(&run).len());
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = probes.join().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("400 packets transmitted, 400 received"),
        "{summary}"
    );
    assert_eq!(fewest, 3, "the upstream kept every next hop");
    assert_eq!(
        bird_pid(node),
        speaker,
        "the new daemon adopted the speaker"
    );
    run.teardown(&mut |_| {}).unwrap();
}

#[test]
fn bgp_01_bgp_03_a_node_off_the_underlay_leaves_the_upstream_by_bfd_and_its_state_says_why() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = start("bf");
    wait_for_hops(&run, 3, Duration::from_secs(30));
    // BFD comes up after the sessions: a session whose BFD is not up yet is not taken
    // down by it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while bfd_up(&frr_dir(&run)) < 3 {
        assert!(Instant::now() < deadline, "BFD up with the three Nodes");
        std::thread::sleep(Duration::from_millis(50));
    }
    let underlay = run
        .netns_name("upstream")
        .unwrap()
        .replace("-upstream", "-underlay");
    // bf-b's port on the bridge: both links stay up, only BFD (or the hold timer) can
    // tell the Node is gone.
    let ip = |args: &[&str]| {
        let ok = Command::new("ip")
            .args(["-n", &underlay])
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip {args:?}");
    };
    // BGP-03: every Node reports its session Up and itself Ready.
    for n in ["bf-a", "bf-b", "bf-c"] {
        wait_for_state(&run, n, |(ready, state, _)| {
            ready == "True" && state == "Up"
        });
    }
    // BGP-03: `kubectl juneau bgp status` asks the speaker itself.
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
        .args(["bgp", "status", "--node", "bf-a", "-o", "json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(status["sessions"][0]["peer"], "upstream", "{status}");
    assert_eq!(status["sessions"][0]["state"], "Up", "{status}");
    // The pool, and bf-a's own NATGateway address as a /32 (NAT-02).
    let mut routes: Vec<String> = serde_json::from_value(status["routes"].clone()).unwrap();
    routes.sort();
    assert_eq!(routes, [POOL, "203.0.113.1/32"], "{status}");
    ip(&["link", "set", "n1", "nomaster"]);
    let gone = wait_for_hops(&run, 2, Duration::from_secs(5));
    assert!(!next_hops(&run).contains("10.99.0.2"));
    // Bounded well above BFD's 300 ms, so that a loaded machine passes and the hold
    // timer (90 s) cannot: how fast it is, is a benchmark's to measure.
    assert!(gone < Duration::from_secs(5), "{gone:?}");
    // BGP-03: the lost Node's own view, as its daemon writes it (its store socket is
    // not on the underlay): the session down, and why.
    wait_for_state(&run, "bf-b", |(ready, state, error)| {
        ready == "False" && state == "Down" && error.contains("BFD session down")
    });
    ip(&["link", "set", "n1", "master", "br0"]);
    wait_for_hops(&run, 3, Duration::from_secs(30));
    run.teardown(&mut |_| {}).unwrap();
}

/// The DaemonSet's speaker container (`juneau speaker`): it waits for the daemon's
/// first file, then becomes BIRD itself (the same process: a container's restart is a
/// restart of BIRD, with graceful restart).
#[test]
fn bgp_01_the_speaker_container_waits_for_the_daemons_file_then_is_bird() {
    use juneau::features::bgp::bird::{ctl, render};
    let ns = juneau::netns::Owned::create(&format!("jn-spk-{}", std::process::id())).unwrap();
    let dir = std::env::temp_dir().join(format!("jn-spk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    /// Ends the speaker this test started, also when the test fails.
    struct Started(std::process::Child);
    impl Drop for Started {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut speaker = Started(
        Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(env!("CARGO_BIN_EXE_juneau"))
            .args(["speaker", "--dir"])
            .arg(&dir)
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        ctl::connect(&dir.join("bird.ctl")).is_err(),
        "no speaker before the daemon's file"
    );
    let conf = render::render(&render::Intent {
        node: "spk".into(),
        router_id: "10.0.0.1".parse().unwrap(),
        local_address: "10.0.0.1".parse().unwrap(),
        peers: Vec::new(),
        prefixes: Vec::new(),
    })
    .unwrap();
    std::fs::write(dir.join("bird.conf"), conf).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut c = loop {
        if let Ok(c) = ctl::connect(&dir.join("bird.ctl")) {
            break c;
        }
        assert!(Instant::now() < deadline, "BIRD answers on its socket");
        std::thread::sleep(Duration::from_millis(50));
    };
    // `ip netns exec` execs the command, which execs BIRD: one process all along.
    let pid: u32 = std::fs::read_to_string(dir.join("bird.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        pid,
        speaker.0.id(),
        "the container's process is BIRD itself"
    );
    c.down().unwrap();
    assert!(speaker.0.wait().unwrap().success(), "BIRD left on down");
    let _ = std::fs::remove_dir_all(&dir);
}
