//! Pod admission for L2Network NICs (L2-19, L2-24, L2-26) and the SecurityGroups of
//! every NIC (POL-02). Checked at Pod creation only.
use std::collections::BTreeMap;

use crate::admission::validate::{Snapshot, Verdict, reject};
use crate::api::annotations::{self, NicRequest, Target};

/// The segment a NIC joins, as its SecurityGroups are judged: its kind and name, its
/// Vpc, and whether it has a gateway (SecurityGroups act only on traffic crossing one).
struct Segment<'a> {
    what: String,
    vpc: &'a str,
    gateway: bool,
}

fn segment_of<'a>(nic: &NicRequest, snap: &'a Snapshot) -> Option<Segment<'a>> {
    match &nic.target {
        Target::Subnet(s) => snap.subnet(s).map(|x| Segment {
            what: format!("Subnet {s:?}"),
            vpc: &x.spec.vpc,
            gateway: true,
        }),
        Target::L2Network(l) => snap.l2network(l).map(|x| Segment {
            what: format!("L2Network {l:?}"),
            vpc: &x.spec.vpc,
            gateway: x.spec.gateway.is_some(),
        }),
        Target::ElasticIp(_) => None,
    }
}

/// POL-02, L2-19: a NIC's groups exist and are of its segment's Vpc; a Vpc with
/// `enforceSecurityGroups` gets none of its routed NICs without one (gateway-less
/// L2Networks are exempt: no group could act there).
fn security_groups(nic: &NicRequest, snap: &Snapshot) -> Verdict {
    let iface = &nic.interface;
    let seg = segment_of(nic, snap);
    for g in &nic.security_groups {
        let Some(group) = snap.security_group(g) else {
            return Err(reject(
                "metadata.annotations",
                format!("{iface}: SecurityGroup {g:?} does not exist; create it first"),
            ));
        };
        if let Some(seg) = &seg
            && group.spec.vpc != seg.vpc
        {
            return Err(reject(
                "metadata.annotations",
                format!(
                    "{iface}: SecurityGroup {g:?} belongs to Vpc {:?}, but {} is of Vpc {:?}; use a group of Vpc {:?}",
                    group.spec.vpc, seg.what, seg.vpc, seg.vpc
                ),
            ));
        }
    }
    if let Some(seg) = &seg
        && seg.gateway
        && nic.security_groups.is_empty()
        && snap
            .vpc(seg.vpc)
            .is_some_and(|v| v.spec.enforce_security_groups)
    {
        return Err(reject(
            "metadata.annotations",
            format!(
                "{iface}: Vpc {:?} has spec.enforceSecurityGroups, so every NIC on its Subnets and gateway L2Networks carries a SecurityGroup, and {iface} on {} has none; add annotation {}security-groups (eth0) or securityGroups in its networks entry, naming a SecurityGroup of Vpc {:?}",
                seg.vpc,
                seg.what,
                crate::api::ANNOTATION_PREFIX,
                seg.vpc
            ),
        ));
    }
    Ok(())
}

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
        security_groups(nic, snap)?;
    }
    Ok(())
}
