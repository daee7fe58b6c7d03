//! The writes of a pass applied to an in-memory [`World`] (the embedded store, and
//! tests that settle a cluster without one), by the same rules as the Kubernetes
//! backend sends them (`store/k8s/apply.rs`).
use super::World;
use super::plan::{Key, Write, key_of, name_of};
use crate::api::{Subnet, service::MANAGED_BY_JUNEAU};

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
        Write::BgpAdvertisement(a) => {
            let n = name_of(a);
            match o
                .bgp_advertisements
                .iter_mut()
                .find(|x| named(&x.metadata, &n))
            {
                Some(x) => set(&mut x.spec, a.spec.clone()),
                None => {
                    o.bgp_advertisements.push(a.clone());
                    true
                }
            }
        }
        Write::DeleteBgpAdvertisement(n) => {
            let before = o.bgp_advertisements.len();
            o.bgp_advertisements.retain(|x| !named(&x.metadata, n));
            o.bgp_advertisements.len() != before
        }
        Write::BgpNodeState(s) => {
            let n = name_of(s);
            match o
                .bgp_node_states
                .iter_mut()
                .find(|x| named(&x.metadata, &n))
            {
                Some(x) => set(&mut x.spec, s.spec.clone()),
                None => {
                    let mut s = s.clone();
                    s.status = None;
                    o.bgp_node_states.push(s);
                    true
                }
            }
        }
        Write::DeleteBgpNodeState(n) => {
            let before = o.bgp_node_states.len();
            o.bgp_node_states.retain(|x| !named(&x.metadata, n));
            o.bgp_node_states.len() != before
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
