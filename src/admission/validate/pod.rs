//! Pod admission for L2Network NICs (L2-19, L2-24, L2-26). Checked at Pod creation only.
use std::collections::BTreeMap;

use super::{Snapshot, Verdict, reject};
use crate::api::annotations::{self, Target};

pub fn validate_pod_create(
    annotations_of_pod: &BTreeMap<String, String>,
    snap: &Snapshot,
) -> Verdict {
    let nets = annotations::parse(annotations_of_pod)
        .map_err(|e| reject("metadata.annotations", e.to_string()))?;
    let via_networks =
        annotations_of_pod.contains_key(&format!("{}networks", crate::api::ANNOTATION_PREFIX));
    for nic in &nets.nics {
        match &nic.target {
            Target::Subnet(s) => {
                if snap.subnet(s).is_none() && snap.l2network(s).is_some() {
                    return Err(reject(
                        "metadata.annotations",
                        format!(
                            "{}: annotation subnet takes Subnet names only; {s:?} is an L2Network: use networks: [{{\"interface\": \"{}\", \"l2Network\": \"{s}\"}}]",
                            nic.interface, nic.interface
                        ),
                    ));
                }
            }
            Target::L2Network(l) => {
                let Some(net) = snap.l2network(l) else {
                    return Err(reject(
                        "metadata.annotations",
                        format!("{}: L2Network {l:?} does not exist", nic.interface),
                    ));
                };
                let closed = net.spec.gateway.is_none();
                if nic.interface == "eth0" && (net.spec.cidr.is_none() || closed || !via_networks) {
                    return Err(reject(
                        "metadata.annotations",
                        format!(
                            "eth0 can join L2Network {l:?} only if it has both spec.cidr and spec.gateway (a Pod's first NIC needs an address and a default route); attach it as eth1 instead"
                        ),
                    ));
                }
                if closed && !nic.security_groups.is_empty() {
                    return Err(reject(
                        "metadata.annotations",
                        format!(
                            "{}: L2Network {l:?} has no gateway, and SecurityGroups act only on traffic crossing it; remove securityGroups from this entry",
                            nic.interface
                        ),
                    ));
                }
            }
            Target::ElasticIp(_) => {}
        }
    }
    Ok(())
}
