//! The controller: reconcilers are pure functions from a snapshot of the objects to
//! their desired state. `kube.rs` drives them from the Kubernetes API; standalone mode
//! drives them from the embedded store with [`run_once`].
pub mod ipam;
pub mod kube;
pub mod l2network;
pub mod pod;
pub mod routetable;

use std::collections::BTreeMap;

use crate::{
    api::{NetworkInterface, RouteTable, l2network::L2NetworkStatus},
    store::{Store, World},
};

/// Controller flags.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `--default-l2-mtu`: 1500 underlay less 50 bytes of VXLAN (L2-21).
    pub default_l2_mtu: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_l2_mtu: 1450,
        }
    }
}

/// What the objects should look like.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    pub l2_status: BTreeMap<String, L2NetworkStatus>,
    pub route_tables: Vec<RouteTable>,
    pub interfaces: Vec<NetworkInterface>,
}

/// Every reconciler, in dependency order: segments first (VNIs, gateways), then the
/// NICs that read them, then the routes.
pub fn reconcile(world: &World, cfg: &Config) -> Desired {
    let l2_status = l2network::reconcile_all(&world.objects, cfg);
    let mut objects = world.objects.clone();
    for l in &mut objects.l2networks {
        l.status = l2_status
            .get(l.metadata.name.as_deref().unwrap_or(""))
            .cloned();
    }
    let interfaces = pod::reconcile_all(&world.pods, &objects);
    let route_tables = routetable::reconcile_all(&objects);
    Desired {
        l2_status,
        route_tables,
        interfaces,
    }
}

/// One pass over the embedded store; true when anything changed.
pub fn run_once(store: &Store, cfg: &Config) -> bool {
    let (world, _) = store.read();
    let desired = reconcile(&world, cfg);
    let mut changed = false;
    for l in &world.objects.l2networks {
        let want = desired
            .l2_status
            .get(l.metadata.name.as_deref().unwrap_or(""));
        changed |= l.status.as_ref() != want;
    }
    changed |= world.objects.route_tables != desired.route_tables;
    changed |= world.objects.interfaces != desired.interfaces;
    if changed {
        store.write(|w| {
            for l in &mut w.objects.l2networks {
                l.status = desired
                    .l2_status
                    .get(l.metadata.name.as_deref().unwrap_or(""))
                    .cloned();
            }
            w.objects.route_tables = desired.route_tables;
            w.objects.interfaces = desired.interfaces;
        });
    }
    changed
}

#[cfg(test)]
mod kube_tests;
