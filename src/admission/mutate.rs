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
    // L2-27 for an L2Network eth0, EIP-17 for a direct one: neither has the cluster's
    // DNS path.
    let outside = match &eth0.target {
        Target::L2Network(l) => snap.l2network(l).is_some(),
        Target::ElasticIp(_) => true,
        Target::Subnet(_) => false,
    };
    (outside
        && matches!(
            pod.dns_policy.as_str(),
            "" | "ClusterFirst" | "ClusterFirstWithHostNet"
        ))
    .then(|| "Default".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eip_17_a_direct_eth0_gets_dns_policy_default_unless_default_none_or_skipped() {
        let snap = Snapshot::default();
        let with = |policy: &str, extra: &[(&str, &str)]| PodRecord {
            dns_policy: policy.into(),
            annotations: [("elastic-ip", "web-eip")]
                .iter()
                .chain(extra)
                .map(|(k, v)| (format!("juneau.loutres.me/{k}"), v.to_string()))
                .collect(),
            ..Default::default()
        };
        for p in ["", "ClusterFirst", "ClusterFirstWithHostNet"] {
            assert_eq!(
                dns_policy(&with(p, &[]), &snap).as_deref(),
                Some("Default"),
                "{p:?}"
            );
        }
        for p in ["Default", "None"] {
            assert_eq!(dns_policy(&with(p, &[]), &snap), None, "{p} stays");
        }
        assert_eq!(
            dns_policy(&with("", &[("dns-inject-skip", "true")]), &snap),
            None
        );
        // A secondary direct NIC leaves eth0 on its Subnet, and its DNS with it.
        let secondary = PodRecord {
            annotations: [(
                "juneau.loutres.me/networks".to_owned(),
                r#"[{"interface":"eth1","elasticIP":"gw-eip"}]"#.to_owned(),
            )]
            .into(),
            ..Default::default()
        };
        assert_eq!(dns_policy(&secondary, &snap), None);
    }
}
