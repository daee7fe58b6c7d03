//! Admission for ElasticIPs: the Pod side (EIP-05, EIP-06 beyond the annotation
//! parser, EIP-20), checked at Pod creation only (EIP-24), and the ExternalNetwork and
//! AddressPool objects.
use std::collections::BTreeMap;

use crate::admission::validate::{Snapshot, Verdict, reject};
use crate::api::{
    AddressPool, ElasticIP, ExternalNetwork, PodRecord, addresspool,
    annotations::{self, Target},
    externalnetwork::{TYPE_ARP, TYPE_BGP},
};

const FIELD: &str = "metadata.annotations";

/// A DNS-1123 subdomain: what an object name is.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

pub fn validate_pod_elastic_ips(pod: &PodRecord, snap: &Snapshot) -> Verdict {
    let nets = annotations::parse(&pod.annotations).map_err(|e| reject(FIELD, e.to_string()))?;
    let mut named: BTreeMap<&str, &str> = BTreeMap::new();
    for nic in &nets.nics {
        let Target::ElasticIp(eip) = &nic.target else {
            continue;
        };
        let iface = nic.interface.as_str();
        if eip.is_empty() {
            return Err(reject(
                FIELD,
                format!(
                    "{iface}: name an ElasticIP in the namespace of the Pod (the name is empty)"
                ),
            ));
        }
        if !is_name(eip) {
            return Err(reject(
                FIELD,
                format!(
                    "{iface}: {eip:?} is not an ElasticIP name: a Pod names an ElasticIP of its own namespace ({:?}); one of another namespace cannot be referenced",
                    pod.namespace
                ),
            ));
        }
        if let Some(other) = named.insert(eip, iface) {
            return Err(reject(
                FIELD,
                format!(
                    "ElasticIP {eip:?} is named by both {other} and {iface}: one ElasticIP is carried by one NIC"
                ),
            ));
        }
        held_elsewhere(pod, eip, snap)?;
    }
    Ok(())
}

/// EIP-20: an ElasticIP carried by a NIC of another running Pod is refused, unless
/// that Pod is terminating or both are one workload (the same allocation identity).
fn held_elsewhere(pod: &PodRecord, eip: &str, snap: &Snapshot) -> Verdict {
    // Attached (NAT-03), also before the ElasticIP's status says so.
    if let Some(a) = snap.elastic_ip_attachments.iter().find(|a| {
        a.metadata.namespace.as_deref().unwrap_or("default") == pod.namespace
            && a.spec.elastic_ip_ref.name == eip
    }) {
        return Err(reject(
            FIELD,
            format!(
                "ElasticIP {eip:?} is used by ElasticIPAttachment {:?}: one ElasticIP serves NAT or a NIC, not both; delete the attachment first",
                a.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    let Some(attachment) = snap
        .elastic_ip(&pod.namespace, eip)
        .and_then(|e| e.status.as_ref()?.attachment.as_ref())
    else {
        return Ok(());
    };
    if attachment.kind == "ElasticIPAttachment" {
        return Err(reject(
            FIELD,
            format!(
                "ElasticIP {eip:?} is used by ElasticIPAttachment {:?}: one ElasticIP serves NAT or a NIC, not both; delete the attachment first",
                attachment.name
            ),
        ));
    }
    let Some(holder) = snap.interfaces.iter().find(|n| {
        n.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
            && n.metadata.name.as_deref() == Some(attachment.name.as_str())
    }) else {
        return Ok(());
    };
    let holder_pod = format!("{}/{}", pod.namespace, holder.spec.pod_ref.name);
    let same_pod = holder.spec.pod_ref.name == pod.name;
    let leaving = snap.terminating_pods.contains(&holder_pod);
    let identity = pod.allocation_identity();
    let same_workload = identity.is_some() && holder.spec.allocation_identity == identity;
    if same_pod || leaving || same_workload {
        return Ok(());
    }
    Err(reject(
        FIELD,
        format!(
            "ElasticIP {eip:?} is already used by NetworkInterface {:?} of running Pod {:?}: delete that Pod first (this Pod then takes the address over)",
            attachment.name, holder.spec.pod_ref.name
        ),
    ))
}

/// An ElasticIP's network and address are its identity once allocated: its address
/// belongs to that network's pools, and NICs and the Nodes' tables hold it.
pub fn validate_elastic_ip_update(old: &ElasticIP, new: &ElasticIP) -> Verdict {
    if old.spec.external_network != new.spec.external_network {
        return Err(reject(
            "spec.externalNetwork",
            "is immutable: the address belongs to that network's pools; create a new ElasticIP on the other ExternalNetwork instead",
        ));
    }
    let allocated = old.status.as_ref().and_then(|s| s.address);
    if let Some(allocated) = allocated
        && old.spec.requested_ip != new.spec.requested_ip
        && new.spec.requested_ip.as_deref() != Some(allocated.to_string().as_str())
    {
        return Err(reject(
            "spec.requestedIP",
            format!(
                "is immutable once an address is allocated ({allocated}); create a new ElasticIP for another address"
            ),
        ));
    }
    Ok(())
}

pub fn validate_external_network_create(net: &ExternalNetwork, snap: &Snapshot) -> Verdict {
    let t = net.spec.type_.as_str();
    if t != TYPE_ARP && t != TYPE_BGP {
        return Err(reject(
            "spec.type",
            format!("{t:?} is not a type: write arp (the Nodes answer ARP on their L2) or bgp"),
        ));
    }
    if net.spec.address_pools.is_empty() {
        return Err(reject("spec.addressPools", "list at least one AddressPool"));
    }
    for (i, p) in net.spec.address_pools.iter().enumerate() {
        // A pool not written yet is admitted (objects come in any order); the status
        // reports it until it is.
        if let Some(pool) = snap.address_pool(p)
            && pool.spec.advertise_mode != t
        {
            return Err(reject(
                format!("spec.addressPools[{i}]"),
                format!(
                    "AddressPool {p:?} has advertiseMode {}: an ExternalNetwork of type {t} takes {t} pools only",
                    pool.spec.advertise_mode
                ),
            ));
        }
    }
    let me = net.metadata.name.as_deref().unwrap_or("");
    for p in &net.spec.address_pools {
        if let Some(other) = snap
            .external_networks
            .iter()
            .find(|n| n.metadata.name.as_deref() != Some(me) && n.spec.address_pools.contains(p))
        {
            return Err(reject(
                "spec.addressPools",
                format!(
                    "AddressPool {p:?} already belongs to ExternalNetwork {:?}: a pool serves one ExternalNetwork",
                    other.metadata.name.as_deref().unwrap_or("")
                ),
            ));
        }
    }
    Ok(())
}

pub fn validate_address_pool_create(pool: &AddressPool, snap: &Snapshot) -> Verdict {
    let mode = pool.spec.advertise_mode.as_str();
    if mode != TYPE_ARP && mode != TYPE_BGP {
        return Err(reject(
            "spec.advertiseMode",
            format!("{mode:?} is not a mode: write arp or bgp"),
        ));
    }
    if pool.spec.addresses.is_empty() {
        return Err(reject("spec.addresses", "list at least one address range"));
    }
    let me = pool.metadata.name.as_deref().unwrap_or("");
    for (i, a) in pool.spec.addresses.iter().enumerate() {
        let (first, last) =
            addresspool::usable(mode, a).map_err(|m| reject(format!("spec.addresses[{i}]"), m))?;
        // A bgp pool's CIDRs are announced as written, and BIRD refuses a route with
        // host bits set.
        if mode == TYPE_BGP
            && let Ok(net) = a.parse::<ipnet::Ipv4Net>()
            && net.trunc() != net
        {
            return Err(reject(
                format!("spec.addresses[{i}]"),
                format!("{a} has host bits set: write {}", net.trunc()),
            ));
        }
        for other in snap
            .address_pools
            .iter()
            .filter(|p| p.metadata.name.as_deref() != Some(me))
        {
            for b in &other.spec.addresses {
                let Ok((f, l)) = addresspool::usable(&other.spec.advertise_mode, b) else {
                    continue;
                };
                if first <= l && f <= last {
                    return Err(reject(
                        format!("spec.addresses[{i}]"),
                        format!(
                            "{a:?} overlaps {b:?} of AddressPool {:?}: an address belongs to one pool",
                            other.metadata.name.as_deref().unwrap_or("")
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        NetworkInterface,
        elasticip::{Attachment, ElasticIPSpec, ElasticIPStatus},
        networkinterface::{NetworkInterfaceSpec, PodRef},
    };

    fn pod(name: &str, annotations: &[(&str, &str)]) -> PodRecord {
        PodRecord {
            namespace: "shop".into(),
            name: name.into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (format!("juneau.loutres.me/{k}"), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn msg(v: Verdict) -> String {
        v.expect_err("refused").to_string()
    }

    /// `web-eip` in namespace shop, carried by `old.eth0` of Pod `old`.
    fn held() -> Snapshot {
        let mut s = Snapshot::default();
        let mut e = ElasticIP::new(
            "web-eip",
            ElasticIPSpec {
                external_network: "ext".into(),
                requested_ip: None,
            },
        );
        e.metadata.namespace = Some("shop".into());
        e.status = Some(ElasticIPStatus {
            attachment: Some(Attachment {
                kind: "NetworkInterface".into(),
                name: "old.eth0".into(),
            }),
            ..Default::default()
        });
        s.elastic_ips.push(e);
        let mut n = NetworkInterface::new(
            "old.eth0",
            NetworkInterfaceSpec {
                interface: "eth0".into(),
                elastic_ip: Some("web-eip".into()),
                pod_ref: PodRef { name: "old".into() },
                ..Default::default()
            },
        );
        n.metadata.namespace = Some("shop".into());
        s.interfaces.push(n);
        s
    }

    #[test]
    fn eip_05_an_elastic_ip_is_named_in_the_pods_namespace_only() {
        let s = Snapshot::default();
        assert_eq!(
            msg(validate_pod_elastic_ips(
                &pod("web", &[("elastic-ip", "other/web-eip")]),
                &s
            )),
            "metadata.annotations: eth0: \"other/web-eip\" is not an ElasticIP name: a Pod names an ElasticIP of its own namespace (\"shop\"); one of another namespace cannot be referenced"
        );
        assert_eq!(
            msg(validate_pod_elastic_ips(
                &pod("web", &[("elastic-ip", "")]),
                &s
            )),
            "metadata.annotations: eth0: name an ElasticIP in the namespace of the Pod (the name is empty)"
        );
        // One that does not exist yet is accepted: the NIC waits for it (EIP-03).
        assert!(validate_pod_elastic_ips(&pod("web", &[("elastic-ip", "later")]), &s).is_ok());
    }

    #[test]
    fn eip_06_one_elastic_ip_is_carried_by_one_nic_of_a_pod() {
        let p = pod(
            "web",
            &[(
                "networks",
                r#"[{"interface":"eth0","elasticIP":"a"},{"interface":"eth1","elasticIP":"a"}]"#,
            )],
        );
        assert_eq!(
            msg(validate_pod_elastic_ips(&p, &Snapshot::default())),
            "metadata.annotations: ElasticIP \"a\" is named by both eth0 and eth1: one ElasticIP is carried by one NIC"
        );
    }

    #[test]
    fn eip_20_a_running_holder_refuses_a_second_pod_unless_terminating_or_the_same_workload() {
        let mut s = held();
        let new = pod("new", &[("elastic-ip", "web-eip")]);
        assert_eq!(
            msg(validate_pod_elastic_ips(&new, &s)),
            "metadata.annotations: ElasticIP \"web-eip\" is already used by NetworkInterface \"old.eth0\" of running Pod \"old\": delete that Pod first (this Pod then takes the address over)"
        );
        // The same Pod name again (a recreated Pod) and other namespaces are not held.
        assert!(validate_pod_elastic_ips(&pod("old", &[("elastic-ip", "web-eip")]), &s).is_ok());
        let mut elsewhere = new.clone();
        elsewhere.namespace = "other".into();
        assert!(validate_pod_elastic_ips(&elsewhere, &s).is_ok());
        // One workload (a VM's next launcher Pod).
        s.interfaces[0].spec.allocation_identity = Some("vmi.web".into());
        let twin = pod(
            "new",
            &[
                ("elastic-ip", "web-eip"),
                ("allocation-identity", "vmi.web"),
            ],
        );
        assert!(validate_pod_elastic_ips(&twin, &s).is_ok());
        assert!(validate_pod_elastic_ips(&new, &s).is_err());
        // A KubeVirt virt-launcher Pod of the same VM, by its labels alone.
        let mut launcher = new.clone();
        launcher.labels = [
            ("kubevirt.io".to_owned(), "virt-launcher".to_owned()),
            ("vm.kubevirt.io/name".to_owned(), "web".to_owned()),
        ]
        .into();
        assert!(validate_pod_elastic_ips(&launcher, &s).is_ok());
        // The holder's Pod is terminating.
        s.terminating_pods.push("shop/old".into());
        assert!(validate_pod_elastic_ips(&new, &s).is_ok());
    }

    #[test]
    fn eip_04_pools_and_networks_are_checked_and_named_in_refusals() {
        let mut s = Snapshot::default();
        let pool = |name: &str, mode: &str, a: &str| {
            AddressPool::new(
                name,
                crate::api::addresspool::AddressPoolSpec {
                    advertise_mode: mode.into(),
                    addresses: vec![a.into()],
                },
            )
        };
        assert_eq!(
            msg(validate_address_pool_create(
                &pool("p", "arp", "192.0.2.9-192.0.2.1"),
                &s
            )),
            "spec.addresses[0]: \"192.0.2.9-192.0.2.1\" starts after it ends: write the lower address first"
        );
        assert!(
            msg(validate_address_pool_create(
                &pool("p", "arp", "192.0.2.0/24"),
                &s
            ))
            .contains("is not a range")
        );
        s.address_pools
            .push(pool("lan", "arp", "192.0.2.10-192.0.2.20"));
        assert_eq!(
            msg(validate_address_pool_create(
                &pool("wan", "bgp", "192.0.2.16/28"),
                &s
            )),
            "spec.addresses[0]: \"192.0.2.16/28\" overlaps \"192.0.2.10-192.0.2.20\" of AddressPool \"lan\": an address belongs to one pool"
        );
        let net = |name: &str, t: &str| {
            ExternalNetwork::new(
                name,
                crate::api::externalnetwork::ExternalNetworkSpec {
                    type_: t.into(),
                    address_pools: vec!["lan".into()],
                },
            )
        };
        assert!(
            msg(validate_external_network_create(&net("x", "l3"), &s))
                .starts_with("spec.type: \"l3\"")
        );
        s.external_networks.push(net("ext", "arp"));
        assert_eq!(
            msg(validate_external_network_create(&net("ext2", "arp"), &s)),
            "spec.addressPools: AddressPool \"lan\" already belongs to ExternalNetwork \"ext\": a pool serves one ExternalNetwork"
        );
    }

    #[test]
    fn eip_04_an_elastic_ips_network_and_allocated_address_are_immutable() {
        let snap = held();
        let mut old = snap.elastic_ip("shop", "web-eip").unwrap().clone();
        old.status.as_mut().unwrap().address = "10.99.0.120".parse().ok();
        let mut moved = old.clone();
        moved.spec.external_network = "other".into();
        assert!(
            msg(validate_elastic_ip_update(&old, &moved))
                .starts_with("spec.externalNetwork: is immutable"),
        );
        let mut other_ip = old.clone();
        other_ip.spec.requested_ip = Some("10.99.0.150".into());
        let m = msg(validate_elastic_ip_update(&old, &other_ip));
        assert!(
            m.starts_with("spec.requestedIP: is immutable once an address is allocated ("),
            "{m}"
        );
        // Before allocation the request may still change; labels always may.
        let mut pinned = old.clone();
        pinned.spec.requested_ip = Some("10.99.0.120".into());
        assert!(
            validate_elastic_ip_update(&old, &pinned).is_ok(),
            "naming the allocated address changes nothing"
        );
        let mut pending = old.clone();
        pending.status = None;
        assert!(validate_elastic_ip_update(&pending, &other_ip).is_ok());
        let mut labelled = old.clone();
        labelled.metadata.labels = Some([("team".to_owned(), "web".to_owned())].into());
        assert!(validate_elastic_ip_update(&old, &labelled).is_ok());
    }
}
