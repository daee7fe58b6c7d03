//! ElasticIPAttachment admission (NAT-03): the ElasticIP and the NIC it maps 1:1 are
//! named once and for good. The ElasticIP exists in the attachment's namespace, has an
//! address inside its network's pools, and serves no one else: no other attachment
//! and no NIC holding it directly (EIP-02, EIP-22; a Pod naming an attached one is
//! refused by the Pod's own rule). The NIC, when it exists already, is a Subnet NIC of
//! a tenant Vpc whose RouteTable goes out by the internet gateway, and has no other
//! attachment. A NIC that does not exist yet is allowed (its Pod may come later): the
//! controller holds it to the same rules then, in the attachment's status.
use std::net::Ipv4Addr;

use crate::admission::validate::{Snapshot, Verdict, reject};
use crate::api::{DEFAULT_VPC, ElasticIPAttachment};

const EIP_FIELD: &str = "spec.elasticIPRef.name";
const NIC_FIELD: &str = "spec.targetRef.networkInterfaceName";

fn ns(a: &ElasticIPAttachment) -> &str {
    a.metadata.namespace.as_deref().unwrap_or("default")
}

pub fn validate_elastic_ip_attachment_create(a: &ElasticIPAttachment, snap: &Snapshot) -> Verdict {
    elastic_ip(a, snap)?;
    target(a, snap)
}

/// Both names are the attachment's identity: the datapath and the ARP answers follow
/// them.
pub fn validate_elastic_ip_attachment_update(
    old: &ElasticIPAttachment,
    new: &ElasticIPAttachment,
) -> Verdict {
    if old.spec != new.spec {
        return Err(reject(
            "spec",
            "is immutable (an attachment maps one ElasticIP onto one NIC); delete this attachment and create another",
        ));
    }
    Ok(())
}

fn elastic_ip(a: &ElasticIPAttachment, snap: &Snapshot) -> Verdict {
    let name = &a.spec.elastic_ip_ref.name;
    if name.is_empty() {
        return Err(reject(EIP_FIELD, "required: the ElasticIP to map 1:1"));
    }
    let Some(e) = snap.elastic_ip(ns(a), name) else {
        return Err(reject(
            EIP_FIELD,
            format!(
                "no ElasticIP {name:?} in namespace {:?}; create it first (an attachment names one of its own namespace)",
                ns(a)
            ),
        ));
    };
    let address = e
        .status
        .as_ref()
        .and_then(|s| s.address)
        .map(|a| a.to_string())
        .or_else(|| e.spec.requested_ip.clone().filter(|r| !r.is_empty()));
    if let (Some(addr), Some(net)) = (address, snap.external_network(&e.spec.external_network)) {
        let ranges = snap.pool_ranges(net);
        let inside = addr
            .parse::<Ipv4Addr>()
            .is_ok_and(|ip| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&ip)));
        if !inside {
            return Err(reject(
                EIP_FIELD,
                format!(
                    "ElasticIP {name:?} has address {addr}, outside every pool of ExternalNetwork {:?} ({}); give it an address of those pools",
                    e.spec.external_network,
                    net.spec.address_pools.join(", ")
                ),
            ));
        }
    }
    let same_ns = |m: &kube::api::ObjectMeta| m.namespace.as_deref().unwrap_or("default") == ns(a);
    if let Some(other) = snap.elastic_ip_attachments.iter().find(|o| {
        same_ns(&o.metadata)
            && o.metadata.name != a.metadata.name
            && o.spec.elastic_ip_ref.name == *name
    }) {
        return Err(reject(
            EIP_FIELD,
            format!(
                "ElasticIP {name:?} is already attached by ElasticIPAttachment {:?}; one ElasticIP maps onto one NIC",
                other.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    // Held directly: by its status, or by a NIC that names it before the status says so.
    let by_status = e
        .status
        .as_ref()
        .and_then(|s| s.attachment.as_ref())
        .filter(|h| h.kind == "NetworkInterface")
        .map(|h| h.name.clone());
    let by_nic = snap
        .interfaces
        .iter()
        .find(|n| same_ns(&n.metadata) && n.spec.elastic_ip.as_deref() == Some(name.as_str()))
        .and_then(|n| n.metadata.name.clone());
    if let Some(nic) = by_status.or(by_nic) {
        return Err(reject(
            EIP_FIELD,
            format!(
                "ElasticIP {name:?} is held directly by NetworkInterface {nic:?}: one ElasticIP serves NAT or a NIC, not both; delete that Pod first"
            ),
        ));
    }
    Ok(())
}

fn target(a: &ElasticIPAttachment, snap: &Snapshot) -> Verdict {
    let wanted = &a.spec.target_ref.network_interface_name;
    if wanted.is_empty() {
        return Err(reject(
            NIC_FIELD,
            "required: the Subnet NIC (<pod>.<interface>) the ElasticIP maps onto",
        ));
    }
    let same_ns = |m: &kube::api::ObjectMeta| m.namespace.as_deref().unwrap_or("default") == ns(a);
    if let Some(other) = snap.elastic_ip_attachments.iter().find(|o| {
        same_ns(&o.metadata)
            && o.metadata.name != a.metadata.name
            && o.spec.target_ref.network_interface_name == *wanted
    }) {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} already has ElasticIPAttachment {:?}; a NIC maps one ElasticIP",
                other.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    let Some(nic) = snap
        .interfaces
        .iter()
        .find(|n| same_ns(&n.metadata) && n.metadata.name.as_deref() == Some(wanted.as_str()))
    else {
        return Ok(());
    };
    let Some(subnet) = nic
        .spec
        .subnet
        .as_deref()
        .filter(|_| nic.spec.elastic_ip.is_none())
        .and_then(|s| snap.subnet(s))
    else {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} is not a NIC of a Subnet (an L2Network's, or one holding an ElasticIP itself, cannot be mapped 1:1); attach to a Subnet NIC"
            ),
        ));
    };
    let vpc = &subnet.spec.vpc;
    if vpc == DEFAULT_VPC {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} is on Subnet {:?} of the default Vpc, which has no internet gateway; attach to a NIC of a tenant Vpc's Subnet",
                subnet.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    let table = snap.table_of(vpc, None);
    let goes_out = snap.route_tables.iter().any(|rt| {
        rt.metadata.name.as_deref() == Some(table.as_str())
            && rt
                .spec
                .routes
                .iter()
                .any(|r| r.via.type_ == "internetGateway")
    });
    if !goes_out {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} is on Subnet {:?}, whose RouteTable {table:?} has no internetGateway route; add one (e.g. 0.0.0.0/0 via internetGateway) first",
                subnet.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "admission_attachment_tests.rs"]
mod tests;
