//! What a serving daemon does on its own threads until it is told to stop: follow the
//! cluster (every Node feature's sync), age the learning tables, collect the
//! connection table, and report the NAT ports a Node ran out of.
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::agent::Agent;

/// The connection table's collection, every 10 s on its own thread and handle: it
/// never holds the port owner's lock, and the datapath never waits on it.
pub(super) fn conntrack(
    mut ct: crate::node::dataplane::Conntrack,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut last = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            if last.elapsed() < Duration::from_secs(10) {
                continue;
            }
            last = Instant::now();
            match ct.sweep(None) {
                Ok(0) => {}
                Ok(n) => tracing::debug!(expired = n, "swept the connection table"),
                Err(e) => tracing::warn!(error = %e, "connection table sweep failed"),
            }
        }
    })
}

/// Keeps the remote lists in step with the cluster, ages the learning tables every
/// tenth of the aging time (at least once a second) and reports the NAT ports.
pub(super) fn cluster(
    agent: Arc<Agent>,
    stop: Arc<AtomicBool>,
    aging: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut seen = 0;
        let mut last_sweep = Instant::now();
        let mut ports = crate::features::nat::ports::PortWatch::default();
        let mut last_ports: Option<Instant> = None;
        let mut bgp = agent
            .bgp_dir
            .clone()
            .map(|d| crate::features::bgp::report::Reporter::new(agent.bgp_off, agent.node_ip, d));
        let mut last_bgp: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            match agent.cluster.wait(seen, Duration::from_millis(500)) {
                Ok(g) => seen = g,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster unreachable; retrying");
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            }
            if let Err(e) = agent.sync_from_cluster() {
                tracing::warn!(error = %e, "remote lists and router not synced");
            }
            if last_sweep.elapsed() >= (aging / 10).max(Duration::from_secs(1)) {
                match agent.dataplane.lock().expect("dataplane lock").age(aging) {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(expired = n, "aged the learning tables"),
                    Err(e) => tracing::warn!(error = %e, "aging failed"),
                }
                last_sweep = Instant::now();
            }
            if last_ports.is_none_or(|t| t.elapsed() >= crate::features::nat::ports::EVERY) {
                report_nat_ports(&agent, &mut ports);
                last_ports = Some(Instant::now());
            }
            if let Some(r) = &mut bgp
                && last_bgp.is_none_or(|t| t.elapsed() >= crate::features::bgp::report::EVERY)
            {
                // BGP-03: the speaker's sessions and what it announces.
                if let Err(e) = r.round(agent.cluster.as_ref(), &agent.node) {
                    tracing::warn!(error = %e, "BGPNodeState not written");
                }
                last_bgp = Some(Instant::now());
            }
        }
    })
}

/// NAT-02: the refusals for want of a port since the last round, as the condition
/// `PortsExhausted` on this Node's attachments (`nat_ports`).
fn report_nat_ports(agent: &Agent, watch: &mut crate::features::nat::ports::PortWatch) {
    let reason = juneau_common::DropReason::NatPortExhausted.name();
    let count = match agent.dataplane.lock().expect("dataplane lock").drops() {
        Ok(d) => d.get(reason).copied().unwrap_or(0),
        Err(e) => {
            tracing::warn!(error = %e, "drop counters unreadable; port exhaustion not reported");
            return;
        }
    };
    let now = Instant::now();
    let new = watch.observe(count, now);
    if new > 0 {
        tracing::warn!(
            refused = new,
            "new connections found no free NAT source port (NAT_PORT_EXHAUSTED)"
        );
    }
    match crate::features::nat::ports::report(agent.cluster.as_ref(), watch, &agent.node, now) {
        Ok(0) => {}
        Ok(n) => tracing::info!(attachments = n, "PortsExhausted condition written"),
        Err(e) => tracing::warn!(error = %e, "PortsExhausted condition not written"),
    }
}
