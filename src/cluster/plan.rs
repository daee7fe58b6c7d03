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

fn key_of<K: kube::Resource>(o: &K) -> Key {
    (
        o.meta()
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        o.meta().name.clone().unwrap_or_default(),
    )
}

fn name_of<K: kube::Resource>(o: &K) -> String {
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

/// Applies `writes` to an in-memory `world` (the embedded store, and tests that settle
/// a cluster without one); true when any was made. `admit_subnet` judges the default
/// Subnet as the store's admission would (a refusal is logged and the Subnet not made).
pub fn apply_to(
    world: &mut World,
    writes: &[Write],
    admit_subnet: &dyn Fn(&Subnet, &World) -> Result<(), String>,
) -> bool {
    let mut changed = false;
    for w in writes {
        changed |= apply_one(world, w, admit_subnet);
    }
    changed
}

fn set<T: PartialEq>(slot: &mut T, want: T) -> bool {
    let changed = *slot != want;
    *slot = want;
    changed
}

fn named(m: &kube::api::ObjectMeta, n: &str) -> bool {
    m.name.as_deref() == Some(n)
}

fn keyed(m: &kube::api::ObjectMeta, k: &Key) -> bool {
    m.namespace.as_deref().unwrap_or("default") == k.0 && m.name.as_deref() == Some(&k.1)
}

fn apply_one(
    world: &mut World,
    w: &Write,
    admit_subnet: &dyn Fn(&Subnet, &World) -> Result<(), String>,
) -> bool {
    let o = &mut world.objects;
    match w {
        Write::CreateVpc(v) => {
            o.vpcs.push(v.clone());
            true
        }
        Write::CreateSubnet(s) => match admit_subnet(s, world) {
            Ok(()) => {
                world.objects.subnets.push(s.clone());
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the default Subnet is refused");
                false
            }
        },
        Write::L2NetworkStatus(n, s) => o
            .l2networks
            .iter_mut()
            .find(|x| named(&x.metadata, n))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        Write::SubnetStatus(n, s) => o
            .subnets
            .iter_mut()
            .find(|x| named(&x.metadata, n))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        Write::NetworkAclStatus(n, s) => o
            .network_acls
            .iter_mut()
            .find(|x| named(&x.metadata, n))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        Write::SecurityGroupStatus(n, s) => o
            .security_groups
            .iter_mut()
            .find(|x| named(&x.metadata, n))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        // Nothing in memory waits for a finalizer (a delete is at once), and a user's
        // update would drop it again: the list would only cost a pass each time.
        Write::Finalizers { .. } => false,
        Write::ExternalNetworkStatus(n, s) => o
            .external_networks
            .iter_mut()
            .find(|x| named(&x.metadata, n))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        Write::ElasticIpStatus(k, s) => o
            .elastic_ips
            .iter_mut()
            .find(|x| keyed(&x.metadata, k))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        Write::AttachmentStatus(k, s) => o
            .elastic_ip_attachments
            .iter_mut()
            .find(|x| keyed(&x.metadata, k))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        Write::Advertisement(a) => {
            match o
                .arp_advertisements
                .iter_mut()
                .find(|x| named(&x.metadata, &name_of(a)))
            {
                Some(x) => set(&mut x.spec, a.spec.clone()),
                None => {
                    o.arp_advertisements.push(a.clone());
                    true
                }
            }
        }
        Write::DeleteAdvertisement(n) => {
            let before = o.arp_advertisements.len();
            o.arp_advertisements.retain(|x| !named(&x.metadata, n));
            o.arp_advertisements.len() != before
        }
        Write::NatGatewayStatus(n, s) => o
            .nat_gateways
            .iter_mut()
            .find(|x| named(&x.metadata, n))
            .is_some_and(|x| set(&mut x.status, Some(s.clone()))),
        Write::NodeAttachment {
            attachment,
            spec,
            status,
        } => {
            let n = name_of(attachment);
            match o
                .external_network_attachments
                .iter_mut()
                .find(|x| named(&x.metadata, &n))
            {
                Some(x) => {
                    let mut changed = false;
                    if *spec {
                        changed |= set(&mut x.spec, attachment.spec.clone());
                    }
                    if *status {
                        changed |= set(&mut x.status, attachment.status.clone());
                    }
                    changed
                }
                None => {
                    o.external_network_attachments.push(attachment.clone());
                    true
                }
            }
        }
        Write::DeleteNodeAttachment(n) => {
            let before = o.external_network_attachments.len();
            o.external_network_attachments
                .retain(|x| !named(&x.metadata, n));
            o.external_network_attachments.len() != before
        }
        Write::Routes(n, routes) => o
            .route_tables
            .iter_mut()
            .find(|x| named(&x.metadata, n))
            .is_some_and(|x| set(&mut x.spec.routes, routes.clone())),
        Write::Interface { nic, spec, status } => {
            let k = key_of(nic);
            match o.interfaces.iter_mut().find(|x| keyed(&x.metadata, &k)) {
                Some(x) => {
                    let mut changed = false;
                    if *spec {
                        changed |= set(&mut x.spec, nic.spec.clone());
                    }
                    if *status {
                        changed |= set(&mut x.status, nic.status.clone());
                    }
                    changed
                }
                None => {
                    o.interfaces.push(nic.clone());
                    true
                }
            }
        }
        Write::DeleteInterface(k) => {
            let before = o.interfaces.len();
            o.interfaces.retain(|x| !keyed(&x.metadata, k));
            o.interfaces.len() != before
        }
        Write::Slices(slices) => {
            world
                .endpoint_slices
                .retain(|s| s.managed_by != MANAGED_BY_JUNEAU);
            world.endpoint_slices.extend(slices.iter().cloned());
            true
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
