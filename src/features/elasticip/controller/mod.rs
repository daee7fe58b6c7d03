//! ElasticIPs held directly by Pod NICs or attached to Subnet NICs (seed 003):
//! addresses from the ExternalNetwork's pools (`address`), one holder per ElasticIP
//! (`holder`), and what follows from it: the NICs' addresses, routes and rules, the
//! ElasticIP's status, the ElasticIPAttachments' 1:1 mappings (`attachment`, NAT-03)
//! and their conflicts with a NIC (EIP-22), and the ARPAdvertisement of an `arp`
//! network that follows the holder's Node (EIP-11).
mod address;
mod advertise;
mod attachment;
#[cfg(test)]
mod attachment_tests;
mod holder;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::{
    admission::validate::Snapshot,
    api::{
        ARPAdvertisement, NetworkInterface, PodRecord,
        elasticip::{ElasticIPStatus, FINALIZER},
        elasticipattachment::ElasticIPAttachmentStatus,
    },
};

pub use crate::controller::externalnetwork::Unallocated;
pub use address::allocate;

use crate::cluster::key;

/// The gateway every direct NIC routes by: no host, answered by the Node-side veth
/// (EIP-08).
pub const NIC_GATEWAY: &str = "169.254.0.1";
/// Priority of a secondary direct NIC's `from <EIP>` rule, ahead of main (EIP-10).
pub const RULE_PRIORITY: u32 = 100;

const KIND_NIC: &str = "NetworkInterface";
const KIND_EIPA: &str = "ElasticIPAttachment";

fn ns(o: &impl kube::Resource) -> &str {
    o.meta().namespace.as_deref().unwrap_or("default")
}

fn name(o: &impl kube::Resource) -> &str {
    o.meta().name.as_deref().unwrap_or("")
}

/// A NIC's status while its ElasticIP cannot be used yet, and why.
fn waiting(reason: &str, message: String) -> crate::api::networkinterface::NetworkInterfaceStatus {
    crate::api::networkinterface::NetworkInterfaceStatus {
        phase: "Pending".into(),
        conditions: vec![crate::api::condition::Condition::new(
            "Allocated",
            false,
            reason,
            message,
        )],
        ..Default::default()
    }
}

/// What the ElasticIP reconciler wants written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub elastic_ip_status: BTreeMap<String, ElasticIPStatus>,
    pub attachment_status: BTreeMap<String, ElasticIPAttachmentStatus>,
    pub arp_advertisements: Vec<ARPAdvertisement>,
    /// Pods none of whose NICs are made yet because a direct NIC's network is not ready
    /// (EIP-03, EIP-25): `namespace/pod` and why.
    pub waiting: Vec<(String, String)>,
    /// ElasticIPs (`namespace/name`) that get the finalizer (every one not being
    /// deleted), and those whose deletion may complete: no NIC names them any more
    /// (EIP-19).
    pub finalize: Vec<String>,
    pub release: Vec<String>,
}

/// Completes the direct NICs among `interfaces` (made by the Pod controller with only
/// their spec) and says what the ElasticIPs look like. `snap` has the statuses of this
/// pass (ExternalNetworks' networkIDs).
pub fn reconcile(
    snap: &Snapshot,
    pods: &[PodRecord],
    interfaces: &mut Vec<NetworkInterface>,
) -> Outcome {
    let mut out = holder::reconcile(snap, &allocate(snap), pods, interfaces);
    // Every attachment has a status each pass: one whose ElasticIP is gone or has no
    // address waits for it by name (a status left alone would keep an old `Attached`).
    for a in &snap.elastic_ip_attachments {
        let wanted = &a.spec.elastic_ip_ref.name;
        let why = match snap.elastic_ip(ns(a), wanted) {
            None => format!("no ElasticIP {wanted:?} in namespace {:?}", ns(a)),
            Some(_) => format!("ElasticIP {wanted:?} has no address yet"),
        };
        out.attachment_status
            .entry(key(a))
            .or_insert_with(|| ElasticIPAttachmentStatus {
                phase: "Pending".into(),
                conditions: vec![crate::api::condition::Condition::new(
                    "Ready",
                    false,
                    "WaitingForElasticIP",
                    why,
                )],
                ..Default::default()
            });
    }
    for e in &snap.elastic_ips {
        let has = e
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == FINALIZER));
        let named = interfaces.iter().any(|n| {
            n.metadata.namespace == e.metadata.namespace
                && n.spec.elastic_ip.as_deref() == e.metadata.name.as_deref()
        });
        match (e.metadata.deletion_timestamp.is_some(), has) {
            (false, false) => out.finalize.push(key(e)),
            (true, true) if !named => out.release.push(key(e)),
            _ => {}
        }
    }
    out
}
