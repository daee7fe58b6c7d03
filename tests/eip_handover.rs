//! EIP-20 on a standalone cluster: an ElasticIP named by two Pods of one workload (the
//! same allocation identity, as a VM's launcher Pods), both created at once and their
//! ADDs run side by side, is carried by one NIC; the other Pod waits in
//! ContainerCreating (its ADD says why) and takes the address as soon as the holder is
//! deleted, on another Node, and the external client's flow comes back.
//! With gratuitous ARP (★, the default) the router's cache moves to the new Node at
//! once; without it (EIP-11, the reference) nothing unsolicited is sent and the router
//! keeps the old Node, which carries the packets to the new holder.
use std::time::{Duration, Instant};

#[path = "common/eip_handover.rs"]
mod fixture;

use fixture::{EIP, launcher};
use juneau::{
    scenario::steps,
    standalone::{Options, Run},
};

fn scenario(nodes: [&str; 2]) -> juneau::standalone::Scenario {
    fixture::scenario("ElasticIP handover", &nodes)
}

fn client_ping(run: &Run) -> Result<String, String> {
    steps::ping_all(run, juneau::scenario::CLIENT, EIP, 3)
}

/// The router's MAC for the ElasticIP.
fn router_sees(run: &Run) -> String {
    steps::exec(
        run,
        juneau::scenario::UPSTREAM,
        &["ip", "neigh", "show", EIP],
    )
    .unwrap()
}

const NODE_A_MAC: &str = "lladdr 02:00:00:99:00:01";
const NODE_B_MAC: &str = "lladdr 02:00:00:99:00:02";

/// Runs the handover with `node_args` for the daemons; returns the run (the new holder
/// on the second Node) and the client's probes lost while it happened.
fn handover(nodes: [&str; 2], node_args: &[&str]) -> (Run, u64) {
    let opts = Options {
        node_args: node_args.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    };
    let mut run = Run::start(&scenario(nodes), &opts, &mut |_| {}).expect("start");
    // Both launchers at once, past the webhook together (the race of EIP-20), their
    // ADDs run side by side as two kubelets would: the first admitted holds the
    // address, the other's ADD gives up after the daemon's wait, with the reason, and
    // its NIC names the holder.
    run.admit_pod(&launcher("launcher-1", nodes[0]))
        .expect("the first launcher");
    run.admit_pod(&launcher("launcher-2", nodes[1]))
        .expect("the second launcher");
    let (first, second) = std::thread::scope(|s| {
        let one = s.spawn(|| run.retry_add("launcher-1"));
        let two = s.spawn(|| run.retry_add("launcher-2"));
        (one.join().unwrap(), two.join().unwrap())
    });
    first.expect("the first launcher holds the ElasticIP");
    let waited = second
        .expect_err("the second launcher's ADD waits for the ElasticIP")
        .to_string();
    assert!(waited.contains("not allocated yet"), "{waited}");
    // The reason travels with the error: which NIC waits, for what, and for whom.
    assert!(
        waited.contains("launcher-2.eth0: WaitingForElasticIP")
            && waited.contains("launcher-1.eth0"),
        "{waited}"
    );
    client_ping(&run).expect("the client reaches the ElasticIP on the first Node");
    assert!(
        router_sees(&run).contains(NODE_A_MAC),
        "{}",
        router_sees(&run)
    );
    let nic = run.store.interfaces_of("default", "launcher-2");
    let st = nic[0].status.clone().unwrap();
    assert_eq!(st.phase, "Pending");
    assert_eq!(st.conditions[0].reason, "WaitingForElasticIP");
    assert!(
        st.conditions[0].message.contains("launcher-1.eth0"),
        "{:?}",
        st.conditions
    );
    // The client pings every 50 ms while the holder goes and the other takes over.
    let probes = steps::Bed::tmp(&run).join("probes");
    let _pinger = steps::Daemon::start(
        &steps::Bed::netns_name(&run, juneau::scenario::CLIENT).unwrap(),
        &[
            "sh",
            "-c",
            &format!(
                "exec stdbuf -oL ping -i 0.05 -W 1 {EIP} > {}",
                probes.display()
            ),
        ],
    )
    .expect("start the probes");
    std::thread::sleep(Duration::from_millis(500));
    run.delete_pod("launcher-1").expect("delete the holder");
    let t = Instant::now();
    let added = loop {
        match run.retry_add("launcher-2") {
            Ok(out) => break out,
            Err(e) if t.elapsed() < Duration::from_secs(30) => eprintln!("retry: {e}"),
            Err(e) => panic!("the waiting launcher never got the ElasticIP: {e}"),
        }
    };
    assert!(added.contains(&format!("{EIP}/32")), "{added}");
    eprintln!(
        "handover: ADD done {:?} after the holder's DEL",
        t.elapsed()
    );
    std::thread::sleep(Duration::from_secs(3));
    drop(_pinger);
    let out = std::fs::read_to_string(&probes).unwrap_or_default();
    let replies = out.lines().filter(|l| l.contains("bytes from")).count() as u64;
    let sent = out
        .lines()
        .filter_map(|l| {
            l.split("icmp_seq=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    let lost = sent.saturating_sub(replies);
    eprintln!("probes: {replies} replies, highest sequence {sent}, {lost} lost");
    assert!(
        replies > 0 && out.lines().last().is_some_and(|l| l.contains("bytes from")),
        "the flow never came back: {out}"
    );
    (run, lost)
}

#[test]
fn eip_20_the_waiting_nic_takes_over_and_gratuitous_arp_moves_the_router_at_once() {
    let (run, lost) = handover(["ga-a", "ga-b"], &[]);
    // Three rounds 1.1 s apart have passed: the router was told, nobody asked.
    assert!(
        router_sees(&run).contains(NODE_B_MAC),
        "{}",
        router_sees(&run)
    );
    eprintln!("with gratuitous ARP: {lost} probes of 50 ms lost");
    client_ping(&run).expect("the client is served by the new Node");
}

#[test]
fn eip_11_eip_20_without_gratuitous_arp_nothing_unsolicited_and_the_old_node_carries() {
    let (run, lost) = handover(["gn-a", "gn-b"], &["--garp-rounds", "0"]);
    // Nothing unsolicited: the router still sends to the first Node, which carries
    // the packets to the new holder.
    assert!(
        router_sees(&run).contains(NODE_A_MAC),
        "{}",
        router_sees(&run)
    );
    eprintln!("without gratuitous ARP: {lost} probes of 50 ms lost");
    // Once it asks again, only the new holder's Node answers.
    steps::exec(
        &run,
        juneau::scenario::UPSTREAM,
        &["ip", "neigh", "flush", "dev", "ul0"],
    )
    .unwrap();
    client_ping(&run).expect("after the router asked again");
    assert!(
        router_sees(&run).contains(NODE_B_MAC),
        "{}",
        router_sees(&run)
    );
}
