//! NAT-02's refusals made visible where a user looks: a new connection that finds no
//! free source port on this Node's NATGateway address is refused at once by the
//! datapath (a TCP RST or an ICMP error to the Pod) and counted as
//! `NAT_PORT_EXHAUSTED`; this Node's daemon turns that counter into the condition
//! `PortsExhausted` on its own ExternalNetworkAttachments, True while refusals keep
//! coming and for [`QUIET_AFTER`] after the last, then False. The controller owns
//! `Ready` and carries this one over (`controller::natgateway`).
//!
//! The counter is pinned and per Node, not per address: a Node with attachments on
//! two ExternalNetworks shows the condition on both. What to do about it is in the
//! message: one address gives each outside address and port 64,512 connections at a
//! time, so the remedy is more Nodes or more server addresses, not a bigger pool.
use std::time::{Duration, Instant};

use crate::{
    api::{ExternalNetworkAttachment, PORTS_EXHAUSTED, condition::Condition},
    cluster::{Cluster, ClusterError},
};

/// How often the daemon reads the counter.
pub const EVERY: Duration = Duration::from_secs(5);
/// How long after the last refusal the condition stays True.
pub const QUIET_AFTER: Duration = Duration::from_secs(60);

/// What the daemon saw of the counter.
#[derive(Debug, Default)]
pub struct PortWatch {
    /// The counter at the last read (`None` before the first: the pinned counter
    /// holds refusals from before this daemon started, which are not news).
    last: Option<u64>,
    /// The last read that found new refusals, and how many it found.
    refused: Option<(Instant, u64)>,
}

impl PortWatch {
    /// Takes one read of the counter at `now`; returns the refusals it found new.
    pub fn observe(&mut self, count: u64, now: Instant) -> u64 {
        let new = self.last.map_or(0, |l| count.saturating_sub(l));
        self.last = Some(count);
        if new > 0 {
            self.refused = Some((now, new));
        }
        new
    }

    /// The condition for the attachment of `node` at `address`, at `now`.
    pub fn condition(&self, node: &str, address: &str, now: Instant) -> Condition {
        match self.refused {
            Some((at, n)) if now.duration_since(at) < QUIET_AFTER => Condition::new(
                PORTS_EXHAUSTED,
                true,
                "NoFreePort",
                format!(
                    "{n} new connections from Pods on Node {node} found no free source port on {address} toward their destination in {}s (drop reason NAT_PORT_EXHAUSTED; each was refused at once): one address gives each outside address and port at most 64,512 connections at a time; spread the clients over more Nodes, or the server over more addresses or ports",
                    EVERY.as_secs()
                ),
            ),
            _ => Condition::new(
                PORTS_EXHAUSTED,
                false,
                "PortsAvailable",
                format!(
                    "every new connection got a source port on {address} in the last {}s",
                    QUIET_AFTER.as_secs()
                ),
            ),
        }
    }
}

/// The conditions to write: this Node's attachments whose condition differs from what
/// the watch says. An attachment that never had the condition gets none while there
/// is nothing to say (no refusal since the daemon started).
pub fn wanted(
    watch: &PortWatch,
    node: &str,
    attachments: &[ExternalNetworkAttachment],
    now: Instant,
) -> Vec<(String, Condition)> {
    attachments
        .iter()
        .filter(|a| a.spec.node_name == node)
        .filter_map(|a| {
            let status = a.status.as_ref();
            let address = status.and_then(|s| s.assigned_ip)?.to_string();
            let want = watch.condition(node, &address, now);
            let have = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == want.type_));
            match have {
                Some(h) if *h == want => None,
                None if want.status == "False" => None,
                _ => Some((a.metadata.name.clone().unwrap_or_default(), want)),
            }
        })
        .collect()
}

/// One round: reads nothing itself; writes what [`wanted`] says. Returns how many
/// conditions changed.
pub fn report(
    cluster: &dyn Cluster,
    watch: &PortWatch,
    node: &str,
    now: Instant,
) -> Result<usize, ClusterError> {
    let (world, _) = cluster.read()?;
    let mut changed = 0;
    for (name, condition) in wanted(
        watch,
        node,
        &world.objects.external_network_attachments,
        now,
    ) {
        if cluster.set_attachment_condition(&name, condition)? {
            changed += 1;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ExternalNetworkAttachmentSpec, ExternalNetworkAttachmentStatus};

    fn attachment(node: &str, ip: &str, conditions: Vec<Condition>) -> ExternalNetworkAttachment {
        let mut a = ExternalNetworkAttachment::new(
            &format!("ext--{node}"),
            ExternalNetworkAttachmentSpec {
                external_network: "ext".into(),
                node_name: node.into(),
            },
        );
        a.status = Some(ExternalNetworkAttachmentStatus {
            assigned_ip: ip.parse().ok(),
            conditions,
        });
        a
    }

    #[test]
    fn nat_02_refusals_show_on_this_nodes_attachment_until_a_quiet_minute() {
        let t0 = Instant::now();
        let mut w = PortWatch::default();
        // The pinned counter's history is not news.
        assert_eq!(w.observe(500, t0), 0);
        let ready = Condition::new("Ready", true, "Assigned", "x");
        let mine = attachment("a", "10.99.0.110", vec![ready.clone()]);
        let other = attachment("b", "10.99.0.111", vec![ready.clone()]);
        let both = [mine.clone(), other.clone()];
        assert!(wanted(&w, "a", &both, t0).is_empty(), "nothing to say yet");
        // Three refusals since.
        assert_eq!(w.observe(503, t0 + EVERY), 3);
        let now = t0 + EVERY;
        let got = wanted(&w, "a", &both, now);
        assert_eq!(got.len(), 1, "only this Node's attachment: {got:?}");
        assert_eq!(got[0].0, "ext--a");
        let c = &got[0].1;
        assert_eq!(
            (c.type_.as_str(), c.status.as_str()),
            (PORTS_EXHAUSTED, "True")
        );
        assert!(c.message.contains("3 new connections") && c.message.contains("10.99.0.110"));
        // Written: nothing more to write while it holds.
        let shown = attachment("a", "10.99.0.110", vec![ready.clone(), c.clone()]);
        assert_eq!(w.observe(503, now + EVERY), 0);
        assert!(wanted(&w, "a", std::slice::from_ref(&shown), now + EVERY).is_empty());
        // A quiet minute after the last refusal: False.
        let later = now + QUIET_AFTER;
        let got = wanted(&w, "a", std::slice::from_ref(&shown), later);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.status, "False");
        assert_eq!(got[0].1.reason, "PortsAvailable");
    }

    #[test]
    fn nat_02_an_attachment_without_an_address_gets_no_condition() {
        let mut w = PortWatch::default();
        let t0 = Instant::now();
        w.observe(0, t0);
        w.observe(9, t0);
        assert!(wanted(&w, "a", &[attachment("a", "", vec![])], t0).is_empty());
    }
}
