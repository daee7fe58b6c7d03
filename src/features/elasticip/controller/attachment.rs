//! ElasticIPAttachment (NAT-03): the ElasticIP mapped 1:1 onto a Subnet NIC's address,
//! answered for by that NIC's Node. One decision per ElasticIP with its direct holder
//! (`holder.rs`): an attachment and a NIC naming one ElasticIP both wait (EIP-22).
use std::net::Ipv4Addr;

use super::{KIND_EIPA, Outcome, advertise::advertise, key, name, ns, waiting};
use crate::{
    admission::validate::Snapshot,
    api::{
        DEFAULT_VPC, ElasticIP, ElasticIPAttachment, NetworkInterface,
        condition::Condition,
        elasticip::{Attachment, ElasticIPStatus, PHASE_ATTACHED, PHASE_ERROR, PHASE_PENDING},
        elasticipattachment::ElasticIPAttachmentStatus,
    },
};

/// NAT use (NAT-03): one attachment holds the ElasticIP, mapped 1:1 onto its Subnet
/// NIC's address on that NIC's Node, which answers ARP for it; with a NIC or a second
/// attachment beside it everything waits (EIP-22). `None`: conflict.
#[allow(clippy::too_many_arguments)]
pub(super) fn nat(
    snap: &Snapshot,
    e: &ElasticIP,
    eip: Ipv4Addr,
    eipas: &[&ElasticIPAttachment],
    nics: &[String],
    interfaces: &mut [NetworkInterface],
    users: &[usize],
    st: &mut ElasticIPStatus,
    out: &mut Outcome,
) -> Option<(&'static str, Condition)> {
    let clash = !users.is_empty() || eipas.len() > 1;
    if clash {
        for a in eipas {
            // Everyone else naming it: the NICs, the other attachments.
            let others: Vec<String> = nics
                .iter()
                .map(|n| format!("NetworkInterface {n}"))
                .chain(
                    eipas
                        .iter()
                        .filter(|o| name(**o) != name(*a))
                        .map(|o| format!("ElasticIPAttachment {}", name(*o))),
                )
                .collect();
            let message = format!(
                "ElasticIP {:?} is also named by {}: it serves one of them",
                name(e),
                others.join(", ")
            );
            out.attachment_status.insert(
                key(*a),
                ElasticIPAttachmentStatus {
                    elastic_ip: st.address,
                    phase: "Pending".into(),
                    conditions: vec![Condition::new(
                        "Ready",
                        false,
                        "WaitingForElasticIP",
                        message,
                    )],
                    ..Default::default()
                },
            );
        }
        for &i in users {
            interfaces[i].status = Some(waiting(
                "WaitingForElasticIP",
                format!(
                    "ElasticIP {:?} is used by ElasticIPAttachment {:?}",
                    name(e),
                    name(eipas[0])
                ),
            ));
        }
        return None;
    }
    let a = eipas[0];
    st.attachment = Some(Attachment {
        kind: KIND_EIPA.into(),
        name: name(a).to_owned(),
    });
    let mut status = ElasticIPAttachmentStatus {
        elastic_ip: st.address,
        ..Default::default()
    };
    let outcome = match target(snap, a, interfaces) {
        Ok(nic) => {
            let pod_ip = nic.ip().map(|a| a.to_string()).unwrap_or_default();
            let message = format!(
                "ElasticIP {eip} is mapped 1:1 to {pod_ip} of NetworkInterface {:?} on Node {:?}",
                name(nic),
                nic.spec.node_name
            );
            status.pod_ip = nic.ip();
            status.node_name = nic.spec.node_name.clone();
            status.phase = "Attached".into();
            status.conditions = vec![Condition::new("Ready", true, "Attached", message)];
            advertise(snap, e, eip, nic, out);
            (
                PHASE_ATTACHED,
                Condition::new(
                    "Attached",
                    true,
                    "Attached",
                    format!("ElasticIP is attached by {KIND_EIPA} {:?}", name(a)),
                ),
            )
        }
        Err(Unfit {
            error,
            reason,
            message,
        }) => {
            status.phase = if error { "Error" } else { "Pending" }.into();
            status.conditions = vec![Condition::new("Ready", false, reason, message.clone())];
            (
                if error { PHASE_ERROR } else { PHASE_PENDING },
                Condition::new("Attached", false, reason, message),
            )
        }
    };
    out.attachment_status.insert(key(a), status);
    Some(outcome)
}

/// Why an attachment's NIC cannot take its ElasticIP (yet).
struct Unfit {
    /// True: it never will as it is (the user must change something); false: it is
    /// waiting for the NIC.
    error: bool,
    reason: &'static str,
    message: String,
}

/// The NIC an ElasticIPAttachment maps its address onto, once it can: a Subnet NIC of
/// a Vpc other than the default one, whose RouteTable goes out by the internet
/// gateway, allocated and on a Node.
fn target<'a>(
    snap: &Snapshot,
    a: &ElasticIPAttachment,
    interfaces: &'a [NetworkInterface],
) -> Result<&'a NetworkInterface, Unfit> {
    let wanted = &a.spec.target_ref.network_interface_name;
    let fail = |error, reason, message: String| Unfit {
        error,
        reason,
        message,
    };
    let nic = interfaces
        .iter()
        .find(|n| ns(*n) == ns(a) && name(*n) == wanted)
        .ok_or_else(|| {
            fail(
                false,
                "WaitingForNetworkInterface",
                format!("NetworkInterface {}/{wanted} does not exist yet", ns(a)),
            )
        })?;
    let subnet = match (&nic.spec.subnet, &nic.spec.elastic_ip) {
        (Some(s), None) => snap.subnet(s),
        _ => None,
    }
    .ok_or_else(|| {
        fail(
            true,
            "InvalidTarget",
            format!(
                "NetworkInterface {}/{wanted} is not a NIC of a Subnet (an L2Network's or one holding an ElasticIP itself cannot be mapped 1:1); attach to a Subnet NIC",
                ns(a)
            ),
        )
    })?;
    let vpc = &subnet.spec.vpc;
    if vpc == DEFAULT_VPC {
        return Err(fail(
            true,
            "InvalidTarget",
            format!(
                "NetworkInterface {}/{wanted} is on Subnet {:?} of the default Vpc, which has no internet gateway; attach to a NIC of a tenant Vpc's Subnet",
                ns(a),
                name(subnet)
            ),
        ));
    }
    let table = snap.table_of(vpc, None);
    let out = snap.route_tables.iter().any(|rt| {
        name(rt) == table
            && rt
                .spec
                .routes
                .iter()
                .any(|r| r.via.type_ == "internetGateway")
    });
    if !out {
        return Err(fail(
            true,
            "NoInternetGateway",
            format!(
                "Subnet {:?} routes by RouteTable {table:?}, which has no internetGateway route; add one (e.g. 0.0.0.0/0 via internetGateway)",
                name(subnet)
            ),
        ));
    }
    let allocated = nic
        .status
        .as_ref()
        .is_some_and(|s| s.phase == "Allocated" && s.address.is_some());
    if !allocated || nic.spec.node_name.is_empty() {
        return Err(fail(
            false,
            "WaitingForNetworkInterface",
            format!(
                "NetworkInterface {}/{wanted} has no address or Node yet",
                ns(a)
            ),
        ));
    }
    Ok(nic)
}
