//! The mutating side of admission: what the webhook (and the embedded store) rewrite
//! in an object before it is stored.
use crate::api::{
    PodRecord,
    annotations::{self, Target},
};

use super::validate::Snapshot;

/// L2-27: a Pod whose eth0 is on an L2Network resolves with the Node's DNS (`Default`):
/// no cluster DNS sits on the segment. `Default` and `None` stay;
/// `dns-inject-skip: "true"` turns the rewrite off.
pub fn dns_policy(pod: &PodRecord, snap: &Snapshot) -> Option<String> {
    let nets = annotations::parse(&pod.annotations).ok()?;
    if nets.dns_inject_skip {
        return None;
    }
    let eth0 = nets.nics.iter().find(|n| n.interface == "eth0")?;
    match &eth0.target {
        Target::L2Network(l) if snap.l2network(l).is_some() => matches!(
            pod.dns_policy.as_str(),
            "" | "ClusterFirst" | "ClusterFirstWithHostNet"
        )
        .then(|| "Default".to_owned()),
        _ => None,
    }
}
