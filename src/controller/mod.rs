//! The controller: reconcilers are pure functions from a snapshot of the objects to
//! their desired state. [`run_once`] / [`run_loop`] / [`run_elected`] drive them through
//! the [`Cluster`] interface, over the embedded store (standalone) or the Kubernetes
//! API (`store::k8s`); `command` is `juneau controller`'s start.
pub mod bootstrap;
pub mod command;
pub mod config;
pub mod externalnetwork;
pub mod segments;

use crate::{
    cluster::{Cluster, ClusterError, Desired, World},
    features::{
        elasticip::controller as elasticip,
        l2::controller as l2network,
        nat::controller as natgateway,
        nics::controller as pod,
        policy::controller as policy,
        router::{controller_routetable as routetable, controller_subnet as subnet},
        services::{endpointslice, source as service_source},
    },
};

pub use config::{Config, DEFAULT_SUBNET_CIDR};

/// The NetworkACLs' ids as a segment's status names them, read from `snap` alone: what
/// [`reconcile`] computes first, for a caller that runs one segment kind's reconciler.
pub fn acl_refs(
    snap: &crate::cluster::Snapshot,
) -> std::collections::BTreeMap<String, crate::api::l2network::AclRef> {
    policy::acl_refs(snap, &policy::assign_ids(snap))
}

/// Every reconciler, in dependency order: rule-set ids, segments (VNIs, gateways),
/// then the NICs that read them, the policies' members and the routes.
pub fn reconcile(world: &World, cfg: &Config) -> Desired {
    let mut objects = world.objects.clone();
    // Rule-set ids first: the segments' `status.networkACL` shows this pass's.
    let policy_ids = policy::assign_ids(&objects);
    let acl_refs = policy::acl_refs(&objects, &policy_ids);
    // Subnets before L2Networks: each pass sees the other's VNIs as held.
    let subnet_status = subnet::reconcile_with(&objects, &acl_refs);
    for s in &mut objects.subnets {
        s.status = subnet_status
            .get(s.metadata.name.as_deref().unwrap_or(""))
            .cloned();
    }
    let l2_status = l2network::reconcile_with(&objects, cfg, &acl_refs);
    for l in &mut objects.l2networks {
        l.status = l2_status
            .get(l.metadata.name.as_deref().unwrap_or(""))
            .cloned();
    }
    let external_network_status = externalnetwork::reconcile_all(&objects);
    for n in &mut objects.external_networks {
        n.status = external_network_status
            .get(n.metadata.name.as_deref().unwrap_or(""))
            .cloned();
    }
    let pod::PodNics {
        mut interfaces,
        unreadable,
    } = pod::reconcile_all(&world.pods, &objects);
    let eips = elasticip::reconcile(&objects, &world.pods, &mut interfaces);
    // The Nodes' NAT addresses come from the same pools, out of the ElasticIPs'.
    let nat = natgateway::reconcile(&objects, &world.nodes, &elasticip::allocate(&objects));
    let mut arp_advertisements = eips.arp_advertisements.clone();
    arp_advertisements.extend(nat.arp_advertisements.iter().cloned());
    let mut subnet_status = subnet_status;
    for (subnet, addresses) in service_source::reconcile(&objects, &world.endpoints, &interfaces) {
        if let Some(st) = subnet_status.get_mut(&subnet) {
            st.node_addresses = addresses;
        }
    }
    // The groups' members are the NICs as this pass makes them.
    let policy = policy::reconcile_all(&objects, &policy_ids, &interfaces);
    let route_tables =
        routetable::reconcile_all(&objects, natgateway::is_default_ready(&objects, &nat));
    let (default_vpc, default_subnet) = bootstrap::missing(&world.objects, cfg.default_subnet_cidr);
    let endpoint_slices = cfg.endpoint_slices.then(|| {
        // The slices read the NICs as this pass makes them.
        let mut w = world.clone();
        w.objects.interfaces = interfaces.clone();
        endpointslice::reconcile_all(&w)
    });
    Desired {
        bgp_node_states: crate::features::bgp::controller::node_states(world),
        bgp_advertisements: nat.bgp_advertisements.clone(),
        endpoint_slices,
        l2_status,
        subnet_status,
        network_acl_status: policy.network_acls,
        security_group_status: policy.security_groups,
        default_vpc,
        default_subnet,
        route_tables,
        interfaces,
        external_network_status,
        elastic_ip_status: eips.elastic_ip_status,
        attachment_status: eips.attachment_status,
        arp_advertisements,
        external_network_attachments: nat.attachments,
        nat_gateway_status: nat.nat_gateway_status,
        waiting: eips.waiting,
        unreadable_pods: unreadable,
        eip_finalize: eips.finalize,
        eip_release: eips.release,
    }
}

/// One pass: read, reconcile, write what differs. True when anything changed.
pub fn run_once(cluster: &dyn Cluster, cfg: &Config) -> Result<bool, ClusterError> {
    let (world, _) = cluster.read()?;
    let desired = reconcile(&world, cfg);
    for (pod, reason) in &desired.waiting {
        tracing::info!(%pod, %reason, "waiting for the network of a Pod NIC");
    }
    // Once per Pod and reason: a pass runs after every change.
    static LOGGED: std::sync::Mutex<std::collections::BTreeSet<(String, String)>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut logged = LOGGED.lock().unwrap_or_else(|e| e.into_inner());
    for (pod, reason) in &desired.unreadable_pods {
        if logged.insert((pod.clone(), reason.clone())) {
            tracing::warn!(%pod, %reason, "Pod annotations do not parse; its NICs are kept as they are, none is added");
        }
    }
    drop(logged);
    cluster.apply(&desired)
}

/// Waits for the cluster to move past `seen`. A store that cannot be watched (a remote
/// store whose socket went) is logged and waited out for `timeout`, so that the loop
/// neither spins nor goes quiet.
fn wait_for_change(cluster: &dyn Cluster, seen: u64, timeout: std::time::Duration) -> u64 {
    cluster.wait(seen, timeout).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot watch the cluster; reading it again after a pause");
        std::thread::sleep(timeout);
        seen
    })
}

/// Reconciles until `stop` is set: a pass after every change of the cluster (the
/// standalone run's controller loop).
pub fn run_loop(cluster: &dyn Cluster, cfg: &Config, stop: &std::sync::atomic::AtomicBool) {
    let mut seen = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        match run_once(cluster, cfg) {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "controller pass failed; retrying"),
        }
        seen = wait_for_change(cluster, seen, std::time::Duration::from_millis(500));
    }
}

/// Reconciles while `lead` says this replica holds the leadership (asked before every
/// pass, and at least every `renew` while nothing changes): the other replicas only
/// wait, so two replicas never write at once. Runs until the process ends.
pub fn run_elected(
    cluster: &dyn Cluster,
    cfg: &Config,
    renew: std::time::Duration,
    lead: &dyn Fn() -> Result<bool, ClusterError>,
) -> ! {
    let mut seen = 0;
    let mut leading = false;
    loop {
        let now = lead().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot renew the leadership; standing by");
            false
        });
        if now != leading {
            if now {
                tracing::info!("leading: this replica reconciles");
            } else {
                tracing::info!("not leading: another replica holds the lease");
            }
            leading = now;
        }
        if leading {
            match run_once(cluster, cfg) {
                Ok(true) => {
                    tracing::info!("pass wrote changes");
                    continue;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "controller pass failed; retrying"),
            }
        }
        seen = wait_for_change(cluster, seen, renew);
    }
}
