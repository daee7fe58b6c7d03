//! One holder per ElasticIP (EIP-20): the NIC its status names keeps it while that NIC
//! exists; otherwise nobody while a naming NIC's Pod is terminating (the handover
//! waits for it); otherwise the oldest naming NIC. The holder's NIC carries `<EIP>/32`
//! and routes by 169.254.0.1; the others wait, naming the holder. An ElasticIP named
//! by an ElasticIPAttachment and a NIC at once is in conflict (EIP-22).
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use super::{
    KIND_NIC, NIC_GATEWAY, Outcome, RULE_PRIORITY, Unallocated, advertise::advertise, key, name,
    ns, waiting,
};
use crate::{
    admission::validate::Snapshot,
    api::{
        ElasticIP, ElasticIPAttachment, NetworkInterface, PodRecord,
        condition::Condition,
        elasticip::{
            Attachment, ElasticIPStatus, PHASE_ATTACHED, PHASE_AVAILABLE, PHASE_ERROR,
            PHASE_PENDING,
        },
        networkinterface::{NetworkInterfaceStatus, NicRoute, NicRule},
    },
};

/// Why a direct NIC naming `eip` cannot be built yet, if it cannot (EIP-03, EIP-25).
fn not_ready(
    snap: &Snapshot,
    addrs: &BTreeMap<String, Result<Ipv4Addr, Unallocated>>,
    namespace: &str,
    eip: &str,
) -> Option<String> {
    let Some(e) = snap.elastic_ip(namespace, eip) else {
        return Some(format!("no ElasticIP {eip:?} in namespace {namespace:?}"));
    };
    if let Some(Err((_, why))) = addrs.get(&key(e)) {
        return Some(format!("ElasticIP {eip:?} has no address: {why}"));
    }
    (snap.network_id_of(e) == 0).then(|| {
        format!(
            "ExternalNetwork {:?} has networkID 0",
            e.spec.external_network
        )
    })
}

pub fn reconcile(
    snap: &Snapshot,
    addrs: &BTreeMap<String, Result<Ipv4Addr, Unallocated>>,
    pods: &[PodRecord],
    interfaces: &mut Vec<NetworkInterface>,
) -> Outcome {
    let mut out = Outcome::default();
    // A Pod gets no NIC at all while one of its direct NICs cannot be built, unless its
    // NICs were made before (those stay, and wait).
    let made: BTreeSet<(String, String)> = snap
        .interfaces
        .iter()
        .map(|n| (ns(n).to_owned(), name(n).to_owned()))
        .collect();
    let mut withheld = BTreeSet::new();
    for n in interfaces.iter() {
        let Some(eip) = &n.spec.elastic_ip else {
            continue;
        };
        let at = (ns(n).to_owned(), n.spec.pod_ref.name.clone());
        // A Pod with any NIC made already keeps them all (an annotation edited later
        // adds a NIC that waits, and takes nothing away).
        let started = made
            .iter()
            .any(|(m_ns, m)| *m_ns == at.0 && m.rsplit_once('.').is_some_and(|(p, _)| p == at.1));
        if started || withheld.contains(&at) {
            continue;
        }
        if let Some(why) = not_ready(snap, addrs, &at.0, eip) {
            out.waiting.push((format!("{}/{}", at.0, at.1), why));
            withheld.insert(at);
        }
    }
    interfaces.retain(|n| !withheld.contains(&(ns(n).to_owned(), n.spec.pod_ref.name.clone())));
    // Kept but naming an ElasticIP that is not there: no loop below reaches them.
    for n in interfaces.iter_mut() {
        if let Some(eip) = n.spec.elastic_ip.clone()
            && snap.elastic_ip(ns(n), &eip).is_none()
        {
            n.status = Some(waiting(
                "NetworkNotReady",
                format!("no ElasticIP {eip:?} in namespace {:?}", ns(n)),
            ));
        }
    }
    let pod = |n: &NetworkInterface| {
        pods.iter()
            .find(|p| p.namespace == ns(n) && p.name == n.spec.pod_ref.name)
    };
    for e in &snap.elastic_ips {
        let users: Vec<usize> = (0..interfaces.len())
            .filter(|&i| {
                let n = &interfaces[i];
                ns(n) == ns(e) && n.spec.elastic_ip.as_deref() == Some(name(e))
            })
            .collect();
        let eipas: Vec<&ElasticIPAttachment> = snap
            .elastic_ip_attachments
            .iter()
            .filter(|a| ns(*a) == ns(e) && a.spec.elastic_ip_ref.name == name(e))
            .collect();
        let address = addrs
            .get(&key(e))
            .cloned()
            .unwrap_or(Err(("Allocating", "the address is not chosen yet".into())));
        let mut st = ElasticIPStatus {
            address: address.as_ref().ok().copied(),
            ..Default::default()
        };
        let user_names: Vec<String> = users
            .iter()
            .map(|&i| name(&interfaces[i]).to_owned())
            .collect();
        let allocated = match &address {
            _ if e.metadata.deletion_timestamp.is_some() && !users.is_empty() => Condition::new(
                "Allocated",
                false,
                "WaitingForNetworkInterfaces",
                format!(
                    "ElasticIP is being deleted; it keeps its address until NetworkInterface {} that names it is gone",
                    user_names.join(", ")
                ),
            ),
            Ok(_) => Condition::new(
                "Allocated",
                true,
                "ReconcileSucceeded",
                "ElasticIP address allocated",
            ),
            Err((reason, why)) => Condition::new("Allocated", false, reason, why.clone()),
        };
        let (phase, attached) = match address {
            Err((reason, why)) => {
                for &i in &users {
                    interfaces[i].status = Some(waiting(
                        "NetworkNotReady",
                        format!("ElasticIP {:?} has no address: {why}", name(e)),
                    ));
                }
                let hard = matches!(
                    reason,
                    "MissingDependency" | "InvalidAddressPool" | "InvalidRequestedIP"
                );
                (
                    if hard { PHASE_ERROR } else { PHASE_PENDING },
                    Condition::new(
                        "Attached",
                        false,
                        "AwaitingAttachment",
                        "ElasticIP is not attached",
                    ),
                )
            }
            Ok(eip) if !eipas.is_empty() => super::attachment::nat(
                snap,
                e,
                eip,
                &eipas,
                &user_names,
                interfaces,
                &users,
                &mut st,
                &mut out,
            )
            .unwrap_or_else(|| {
                keep_running_holder(snap, e, interfaces, &users, &mut st, &mut out);
                (PHASE_ERROR, conflict(e, &eipas, &user_names))
            }),
            Ok(eip) => direct(snap, e, eip, pod, interfaces, &users, &mut st, &mut out),
        };
        st.phase = phase.into();
        st.conditions = vec![allocated, attached];
        out.elastic_ip_status.insert(key(e), st);
    }
    out
}

/// EIP-22: a NIC that held the ElasticIP before the conflict keeps its dataplane (the
/// holders every Node writes, and the ARP answers), though its status waits.
fn keep_running_holder(
    snap: &Snapshot,
    e: &ElasticIP,
    interfaces: &[NetworkInterface],
    users: &[usize],
    st: &mut ElasticIPStatus,
    out: &mut Outcome,
) {
    let Some(held) = e
        .status
        .as_ref()
        .and_then(|s| s.attachment.as_ref())
        .filter(|a| a.kind == KIND_NIC)
    else {
        return;
    };
    let Some(&h) = users.iter().find(|&&i| name(&interfaces[i]) == held.name) else {
        return;
    };
    let Some(eip) = st.address else {
        return;
    };
    st.attachment = Some(held.clone());
    advertise(snap, e, eip, &interfaces[h], out);
}

fn conflict(e: &ElasticIP, eipas: &[&ElasticIPAttachment], nics: &[String]) -> Condition {
    let eipas: Vec<&str> = eipas.iter().map(|a| name(*a)).collect();
    Condition::new(
        "Attached",
        false,
        "Conflict",
        format!(
            "ElasticIP {:?} is named by ElasticIPAttachment {} and NetworkInterface {}: one ElasticIP serves one of them; delete the others",
            name(e),
            eipas.join(", "),
            if nics.is_empty() {
                "-".to_owned()
            } else {
                nics.join(", ")
            }
        ),
    )
}

/// Direct use: the holder, the NICs' statuses and the ARPAdvertisement.
#[allow(clippy::too_many_arguments)]
fn direct<'p>(
    snap: &Snapshot,
    e: &ElasticIP,
    eip: Ipv4Addr,
    pod: impl Fn(&NetworkInterface) -> Option<&'p PodRecord>,
    interfaces: &mut [NetworkInterface],
    users: &[usize],
    st: &mut ElasticIPStatus,
    out: &mut Outcome,
) -> (&'static str, Condition) {
    if users.is_empty() {
        return (
            PHASE_AVAILABLE,
            Condition::new(
                "Attached",
                false,
                "AwaitingAttachment",
                "ElasticIP is not attached",
            ),
        );
    }
    let current = e
        .status
        .as_ref()
        .and_then(|s| s.attachment.as_ref())
        .filter(|a| a.kind == KIND_NIC)
        .and_then(|a| {
            users
                .iter()
                .copied()
                .find(|&i| name(&interfaces[i]) == a.name)
        });
    let leaving: Vec<String> = users
        .iter()
        .filter(|&&i| pod(&interfaces[i]).is_none_or(|p| p.terminating))
        .map(|&i| name(&interfaces[i]).to_owned())
        .collect();
    let holder = current.or_else(|| {
        if e.metadata.deletion_timestamp.is_some() || !leaving.is_empty() {
            return None;
        }
        users.iter().copied().min_by_key(|&i| {
            let n = &interfaces[i];
            (
                pod(n).map(|p| p.created.clone()).unwrap_or_default(),
                name(n).to_owned(),
            )
        })
    });
    let Some(h) = holder else {
        let (reason, message) = if leaving.is_empty() {
            (
                "AwaitingAttachment",
                "the ElasticIP is being deleted: it is handed to no new NetworkInterface"
                    .to_owned(),
            )
        } else {
            (
                "WaitingForHandover",
                format!(
                    "waiting for NetworkInterface {} that is being deleted to be gone",
                    leaving.join(", ")
                ),
            )
        };
        for &i in users {
            interfaces[i].status = Some(waiting(
                "WaitingForElasticIP",
                format!(
                    "ElasticIP {:?} has not picked a NetworkInterface to carry it yet: {message}",
                    name(e)
                ),
            ));
        }
        return (
            PHASE_AVAILABLE,
            Condition::new("Attached", false, reason, message),
        );
    };
    let holder_name = name(&interfaces[h]).to_owned();
    let network_id = snap.network_id_of(e);
    for &i in users {
        interfaces[i].status = Some(if i != h {
            waiting(
                "WaitingForElasticIP",
                format!(
                    "ElasticIP {:?} is carried by NetworkInterface {holder_name:?}; this interface takes it over once that one is gone",
                    name(e)
                ),
            )
        } else if network_id == 0 {
            waiting(
                "NetworkNotReady",
                format!(
                    "ExternalNetwork {:?} has networkID 0",
                    e.spec.external_network
                ),
            )
        } else {
            carrier(&interfaces[i], name(e), eip, network_id)
        });
    }
    st.attachment = Some(Attachment {
        kind: KIND_NIC.into(),
        name: holder_name.clone(),
    });
    advertise(snap, e, eip, &interfaces[h], out);
    // The holder's Pod is going and another NIC waits: the handover is under way.
    let handing_over = users.len() > 1 && pod(&interfaces[h]).is_none_or(|p| p.terminating);
    let attached = if handing_over {
        Condition::new(
            "Attached",
            true,
            "WaitingForHandover",
            format!("waiting for NetworkInterface {holder_name} that is being deleted to be gone"),
        )
    } else {
        Condition::new(
            "Attached",
            true,
            "Attached",
            format!("ElasticIP is attached by {KIND_NIC} {holder_name:?}"),
        )
    };
    (PHASE_ATTACHED, attached)
}

/// The holder NIC: `<EIP>/32`, the default route via 169.254.0.1 on the link (EIP-08),
/// in the main table for eth0 and in table N = the EIP as a number, chosen by a rule
/// from the EIP, for a secondary NIC (EIP-10).
fn carrier(
    nic: &NetworkInterface,
    eip_name: &str,
    eip: Ipv4Addr,
    network_id: u32,
) -> NetworkInterfaceStatus {
    let mut st = NetworkInterfaceStatus {
        address: Some(eip.into()),
        vni: network_id,
        phase: "Allocated".into(),
        conditions: vec![Condition::new(
            "Allocated",
            true,
            "Allocated",
            format!("carries the address of ElasticIP {eip_name:?}"),
        )],
        ..Default::default()
    };
    let mut route = NicRoute {
        dst: "0.0.0.0/0".into(),
        gw: NIC_GATEWAY.into(),
        on_link: true,
        table: 0,
    };
    if nic.spec.interface != "eth0" {
        let table = u32::from(eip);
        if table < 256 {
            return NetworkInterfaceStatus {
                phase: "Failed".into(),
                conditions: vec![Condition::new(
                    "Allocated",
                    false,
                    "InvalidElasticIPAddress",
                    format!(
                        "ElasticIP {eip_name:?}: address {eip} maps to route table {table}, which Linux reserves (0-255); a secondary NIC needs an ElasticIP outside 0.0.0.0/24"
                    ),
                )],
                ..Default::default()
            };
        }
        route.table = table;
        st.rules.push(NicRule {
            from: eip.to_string(),
            table,
            priority: RULE_PRIORITY,
        });
    }
    st.routes.push(route);
    st
}
