//! What a controller pass writes, decided once for every backend: [`plan`] compares the
//! objects as read with the [`Desired`] state and lists the [`Write`]s, in the order
//! they are to be made; the embedded store applies them to its `World` ([`apply_to`]),
//! the Kubernetes backend sends each to the API server (`store::k8s::apply`). So both
//! backends write the same things by the same rules:
//!
//! - a status is written when the pass computed one and it differs; an object the pass
//!   computed none for (one created since the read) is left alone;
//! - the default Vpc is made when absent, its Subnet once the Vpc is there;
//! - of a RouteTable only the routes are the controller's, and only of a table that
//!   still exists (one deleted meanwhile stays deleted);
//! - the objects the controller owns (NetworkInterfaces, the ARPAdvertisements of
//!   ElasticIPs and Node addresses, ExternalNetworkAttachments) are written when their
//!   spec or status differs and deleted when no longer wanted;
//! - an ElasticIP's finalizer list is written first, from the version read (EIP-19;
//!   only where a delete waits for it: not in memory);
//! - the EndpointSlices are written where this controller maintains them.
use std::collections::BTreeSet;

use super::{Desired, World, key};
use crate::api::{
    ARPAdvertisement, DEFAULT_VPC, EndpointSliceRecord, ExternalNetworkAttachment,
    NetworkInterface, Subnet, Vpc,
    elasticip::{ElasticIPStatus, FINALIZER},
    elasticipattachment::ElasticIPAttachmentStatus,
    externalnetwork::ExternalNetworkStatus,
    l2network::L2NetworkStatus,
    natgateway::NATGatewayStatus,
    networkacl::NetworkAclStatus,
    routetable::Route,
    securitygroup::SecurityGroupStatus,
    service::MANAGED_BY_JUNEAU,
    subnet::SubnetStatus,
};

/// A namespaced object's `(namespace, name)`, `default` for an unset namespace.
pub type Key = (String, String);

pub(super) fn key_of<K: kube::Resource>(o: &K) -> Key {
    (
        o.meta()
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        o.meta().name.clone().unwrap_or_default(),
    )
}

pub(super) fn name_of<K: kube::Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

/// One write of a pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    CreateVpc(Vpc),
    CreateSubnet(Subnet),
    L2NetworkStatus(String, L2NetworkStatus),
    SubnetStatus(String, SubnetStatus),
    NetworkAclStatus(String, NetworkAclStatus),
    SecurityGroupStatus(String, SecurityGroupStatus),
    /// An ElasticIP's whole finalizer list, preconditioned on `resource_version`.
    Finalizers {
        eip: Key,
        list: Vec<String>,
        resource_version: Option<String>,
    },
    ExternalNetworkStatus(String, ExternalNetworkStatus),
    ElasticIpStatus(Key, ElasticIPStatus),
    AttachmentStatus(Key, ElasticIPAttachmentStatus),
    Advertisement(ARPAdvertisement),
    DeleteAdvertisement(String),
    NatGatewayStatus(String, NATGatewayStatus),
    /// A Node's attachment: its spec when it differs (or it is new), its status when
    /// it differs.
    NodeAttachment {
        attachment: ExternalNetworkAttachment,
        spec: bool,
        status: bool,
    },
    DeleteNodeAttachment(String),
    /// One of the controller's BGPAdvertisements, made or its spec set.
    BgpAdvertisement(crate::api::BGPAdvertisement),
    DeleteBgpAdvertisement(String),
    /// A Node's BGPNodeState, made (or its spec set); its status is the Node's.
    BgpNodeState(crate::api::BGPNodeState),
    DeleteBgpNodeState(String),
    /// A RouteTable's routes, the rest of it left to its owner.
    Routes(String, Vec<Route>),
    /// A NIC: its spec when it differs (or it is new), its status when it differs.
    Interface {
        nic: NetworkInterface,
        spec: bool,
        status: bool,
    },
    DeleteInterface(Key),
    /// Every EndpointSlice this controller manages, replaced whole.
    Slices(Vec<EndpointSliceRecord>),
}

/// Pushes a status write for each object of `have` the pass computed a different
/// status for.
fn statuses<'a, O, S: PartialEq + Clone + 'a>(
    out: &mut Vec<Write>,
    have: &'a [O],
    status: impl Fn(&'a O) -> Option<&'a S>,
    want: impl Fn(&'a O) -> Option<&'a S>,
    write: impl Fn(&'a O, S) -> Write,
) {
    for o in have {
        if let Some(w) = want(o)
            && status(o) != Some(w)
        {
            out.push(write(o, w.clone()));
        }
    }
}

/// Every write that brings `world` to `desired`, in the order to make them.
pub fn plan<'a>(world: &'a World, desired: &'a Desired) -> Vec<Write> {
    let o = &world.objects;
    let mut out = Vec::new();
    if let Some(vpc) = &desired.default_vpc
        && o.vpc(DEFAULT_VPC).is_none()
    {
        out.push(Write::CreateVpc(vpc.clone()));
    }
    // Admitted only once the Vpc exists: the next pass, after the one that made it.
    if let Some(subnet) = &desired.default_subnet
        && o.vpc(DEFAULT_VPC).is_some()
        && o.subnet(DEFAULT_VPC).is_none()
    {
        out.push(Write::CreateSubnet(subnet.clone()));
    }
    statuses(
        &mut out,
        &o.l2networks,
        |l| l.status.as_ref(),
        |l| desired.l2_status.get(&name_of(l)),
        |l, s| Write::L2NetworkStatus(name_of(l), s),
    );
    statuses(
        &mut out,
        &o.subnets,
        |s| s.status.as_ref(),
        |s| desired.subnet_status.get(&name_of(s)),
        |s, st| Write::SubnetStatus(name_of(s), st),
    );
    statuses(
        &mut out,
        &o.network_acls,
        |a| a.status.as_ref(),
        |a| desired.network_acl_status.get(&name_of(a)),
        |a, s| Write::NetworkAclStatus(name_of(a), s),
    );
    statuses(
        &mut out,
        &o.security_groups,
        |g| g.status.as_ref(),
        |g| desired.security_group_status.get(&name_of(g)),
        |g, s| Write::SecurityGroupStatus(name_of(g), s),
    );
    finalizers(&mut out, world, desired);
    statuses(
        &mut out,
        &o.external_networks,
        |n| n.status.as_ref(),
        |n| desired.external_network_status.get(&name_of(n)),
        |n, s| Write::ExternalNetworkStatus(name_of(n), s),
    );
    // One let go is gone (or going) with its status.
    statuses(
        &mut out,
        &o.elastic_ips,
        |e| e.status.as_ref(),
        |e| {
            let k = key(e);
            (!desired.eip_release.contains(&k))
                .then(|| desired.elastic_ip_status.get(&k))
                .flatten()
        },
        |e, s| Write::ElasticIpStatus(key_of(e), s),
    );
    statuses(
        &mut out,
        &o.elastic_ip_attachments,
        |a| a.status.as_ref(),
        |a| desired.attachment_status.get(&key(a)),
        |a, s| Write::AttachmentStatus(key_of(a), s),
    );
    advertisements(&mut out, world, desired);
    statuses(
        &mut out,
        &o.nat_gateways,
        |g| g.status.as_ref(),
        |g| desired.nat_gateway_status.get(&name_of(g)),
        |g, s| Write::NatGatewayStatus(name_of(g), s),
    );
    node_attachments(&mut out, world, desired);
    bgp_node_states(&mut out, world, desired);
    bgp_advertisements(&mut out, world, desired);
    for want in &desired.route_tables {
        if let Some(have) = o.route_table(&name_of(want))
            && have.spec.routes != want.spec.routes
        {
            out.push(Write::Routes(name_of(want), want.spec.routes.clone()));
        }
    }
    interfaces(&mut out, world, desired);
    if let Some(slices) = &desired.endpoint_slices {
        let now: Vec<&EndpointSliceRecord> = world
            .endpoint_slices
            .iter()
            .filter(|s| s.managed_by == MANAGED_BY_JUNEAU)
            .collect();
        if now.len() != slices.len() || now.iter().zip(slices).any(|(a, b)| *a != b) {
            out.push(Write::Slices(slices.clone()));
        }
    }
    out
}

/// EIP-19: every ElasticIP carries the finalizer; a deleted one loses it once no NIC
/// names it. The whole list, from the object as read.
fn finalizers(out: &mut Vec<Write>, world: &World, desired: &Desired) {
    for e in &world.objects.elastic_ips {
        let k = key(e);
        let mut list = e.metadata.finalizers.clone().unwrap_or_default();
        if desired.eip_finalize.contains(&k) {
            list.push(FINALIZER.to_owned());
        } else if desired.eip_release.contains(&k) {
            list.retain(|f| f != FINALIZER);
        } else {
            continue;
        }
        out.push(Write::Finalizers {
            eip: key_of(e),
            list,
            resource_version: e.metadata.resource_version.clone(),
        });
    }
}

/// The ARPAdvertisements the controller owns: an ElasticIP's (`eip-`) and a Node
/// address's (`ena-`); any other is someone else's.
fn advertisements(out: &mut Vec<Write>, world: &World, desired: &Desired) {
    let have = &world.objects.arp_advertisements;
    for want in &desired.arp_advertisements {
        let now = have.iter().find(|a| name_of(*a) == name_of(want));
        if now.map(|a| &a.spec) != Some(&want.spec) {
            out.push(Write::Advertisement(want.clone()));
        }
    }
    let wanted: BTreeSet<String> = desired.arp_advertisements.iter().map(name_of).collect();
    for gone in have
        .iter()
        .map(name_of)
        .filter(|n| (n.starts_with("eip-") || n.starts_with("ena-")) && !wanted.contains(n))
    {
        out.push(Write::DeleteAdvertisement(gone));
    }
}

/// NAT-02: the Nodes' ExternalNetworkAttachments; any other goes.
fn node_attachments(out: &mut Vec<Write>, world: &World, desired: &Desired) {
    let o = &world.objects;
    for want in &desired.external_network_attachments {
        let have = o.external_network_attachment(&name_of(want));
        let spec = have.map(|a| &a.spec) != Some(&want.spec);
        let status =
            want.status.is_some() && have.and_then(|a| a.status.as_ref()) != want.status.as_ref();
        if spec || status {
            out.push(Write::NodeAttachment {
                attachment: want.clone(),
                spec,
                status,
            });
        }
    }
    let wanted: BTreeSet<String> = desired
        .external_network_attachments
        .iter()
        .map(name_of)
        .collect();
    for gone in o
        .external_network_attachments
        .iter()
        .map(name_of)
        .filter(|n| !wanted.contains(n))
    {
        out.push(Write::DeleteNodeAttachment(gone));
    }
}

/// NAT-02 on bgp networks: the controller's BGPAdvertisements; one of its own that is
/// no longer wanted goes, a user's is never touched.
fn bgp_advertisements(out: &mut Vec<Write>, world: &World, desired: &Desired) {
    use crate::api::bgpadvertisement::MANAGED_BY;
    let have = &world.objects.bgp_advertisements;
    for want in &desired.bgp_advertisements {
        let n = name_of(want);
        if have
            .iter()
            .find(|h| name_of(*h) == n)
            .is_none_or(|h| h.spec != want.spec)
        {
            out.push(Write::BgpAdvertisement(want.clone()));
        }
    }
    let wanted: BTreeSet<String> = desired.bgp_advertisements.iter().map(name_of).collect();
    let ours = |a: &&crate::api::BGPAdvertisement| {
        a.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1))
    };
    for gone in have
        .iter()
        .filter(ours)
        .map(name_of)
        .filter(|n| !wanted.contains(n))
    {
        out.push(Write::DeleteBgpAdvertisement(gone));
    }
}

/// BGP-03: the Nodes' BGPNodeStates, spec only; any other goes.
fn bgp_node_states(out: &mut Vec<Write>, world: &World, desired: &Desired) {
    let have = &world.objects.bgp_node_states;
    for want in &desired.bgp_node_states {
        let n = name_of(want);
        if have
            .iter()
            .find(|h| name_of(*h) == n)
            .is_none_or(|h| h.spec != want.spec)
        {
            out.push(Write::BgpNodeState(want.clone()));
        }
    }
    let wanted: BTreeSet<String> = desired.bgp_node_states.iter().map(name_of).collect();
    for gone in have.iter().map(name_of).filter(|n| !wanted.contains(n)) {
        out.push(Write::DeleteBgpNodeState(gone));
    }
}

/// The Pods' NICs; one no Pod asks for any more goes.
fn interfaces(out: &mut Vec<Write>, world: &World, desired: &Desired) {
    let have = &world.objects.interfaces;
    for want in &desired.interfaces {
        let k = key_of(want);
        let now = have.iter().find(|n| key_of(*n) == k);
        let spec = now.map(|n| &n.spec) != Some(&want.spec);
        let status =
            want.status.is_some() && now.and_then(|n| n.status.as_ref()) != want.status.as_ref();
        if spec || status {
            out.push(Write::Interface {
                nic: want.clone(),
                spec,
                status,
            });
        }
    }
    let wanted: BTreeSet<Key> = desired.interfaces.iter().map(key_of).collect();
    for gone in have.iter().map(key_of).filter(|k| !wanted.contains(k)) {
        out.push(Write::DeleteInterface(gone));
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
