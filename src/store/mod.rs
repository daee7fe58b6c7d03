//! The object store behind the controller and the node daemons.
//!
//! Two backends implement the same reads and writes: the Kubernetes API (production,
//! `store::k8s`) and this embedded one, an in-process store that
//! standalone mode loads from a scenario. It runs the same admission rules as the
//! webhook, so a standalone run refuses exactly what a cluster would.
use std::{
    sync::{Arc, Condvar, Mutex, MutexGuard},
    time::Duration,
};

pub mod k8s;
pub mod remote;
mod services;
mod update;

pub use services::{ENDPOINT_SLICE_KIND, SERVICE_KIND};

pub use crate::api::{Object, PodRecord};
use crate::{
    admission::{self, Rejection, validate},
    api::{NetworkEndpoint, NetworkInterface, NodeRecord},
    cluster::{Desired, World},
};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("admission webhook denied the request: {0}")]
    Denied(#[from] Rejection),
    #[error("{kind} {name:?} already exists")]
    Exists { kind: &'static str, name: String },
    #[error("{kind} {name:?} does not exist: create it first")]
    NotFound { kind: &'static str, name: String },
    #[error("{0}")]
    Parse(#[from] crate::api::ObjectError),
    /// An object of Kubernetes' own kinds (a Service) that the API server would refuse:
    /// the field and the fix.
    #[error("{0}")]
    Invalid(String),
}

/// The embedded store: a [`World`] behind a lock, with a generation counter that
/// watchers wait on.
#[derive(Clone, Default)]
pub struct Store {
    inner: Arc<(Mutex<(World, u64)>, Condvar)>,
}

fn name_of<K: kube::Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

impl Store {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, (World, u64)> {
        self.inner.0.lock().expect("store lock")
    }

    /// A copy of everything, and its generation.
    pub fn read(&self) -> (World, u64) {
        let g = self.lock();
        (g.0.clone(), g.1)
    }

    /// Applies `f` to the world and wakes every watcher.
    pub fn write<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut g = self.lock();
        let out = f(&mut g.0);
        g.1 += 1;
        self.inner.1.notify_all();
        out
    }

    /// Applies `f`; wakes the watchers only when it says it changed something.
    pub fn write_if(&self, f: impl FnOnce(&mut World) -> bool) -> bool {
        let mut g = self.lock();
        let changed = f(&mut g.0);
        if changed {
            g.1 += 1;
            self.inner.1.notify_all();
        }
        changed
    }

    /// Waits until the generation moves past `seen` (or `timeout`); returns the new one.
    pub fn wait(&self, seen: u64, timeout: Duration) -> u64 {
        let g = self.lock();
        let (g, _) = self
            .inner
            .1
            .wait_timeout_while(g, timeout, |g| g.1 <= seen)
            .expect("store lock");
        g.1
    }

    /// Creates an object after the admission rules accepted it. Nothing is written on
    /// refusal.
    pub fn create(&self, obj: Object) -> Result<(), StoreError> {
        self.write(|w| {
            let s = &mut w.objects;
            macro_rules! add {
                ($list:ident, $o:expr, $kind:literal) => {{
                    let n = name_of(&$o);
                    if s.$list.iter().any(|x| name_of(x) == n) {
                        return Err(StoreError::Exists {
                            kind: $kind,
                            name: n,
                        });
                    }
                    s.$list.push($o);
                }};
            }
            macro_rules! add_namespaced {
                ($list:ident, $o:expr, $kind:literal) => {{
                    let k = crate::cluster::key(&$o);
                    if s.$list.iter().any(|x| crate::cluster::key(x) == k) {
                        return Err(StoreError::Exists {
                            kind: $kind,
                            name: k,
                        });
                    }
                    s.$list.push($o);
                }};
            }
            admission::admit(admission::Request::Create(&obj), s)?;
            match obj {
                Object::L2Network(o) => add!(l2networks, o, "L2Network"),
                Object::Vpc(o) => add!(vpcs, o, "Vpc"),
                Object::VpcPeering(o) => add!(peerings, o, "VpcPeering"),
                Object::TransitGateway(o) => add!(transit_gateways, o, "TransitGateway"),
                Object::Subnet(o) => add!(subnets, o, "Subnet"),
                Object::RouteTable(o) => add!(route_tables, o, "RouteTable"),
                Object::NetworkACL(o) => add!(network_acls, o, "NetworkACL"),
                Object::SecurityGroup(o) => add!(security_groups, o, "SecurityGroup"),
                Object::ExternalNetwork(o) => add!(external_networks, o, "ExternalNetwork"),
                Object::AddressPool(o) => add!(address_pools, o, "AddressPool"),
                Object::NATGateway(o) => add!(nat_gateways, o, "NATGateway"),
                Object::BGPPeer(o) => add!(bgp_peers, o, "BGPPeer"),
                Object::BGPAdvertisement(o) => add!(bgp_advertisements, o, "BGPAdvertisement"),
                Object::ElasticIP(mut o) => {
                    o.metadata.namespace.get_or_insert_with(|| "default".into());
                    add_namespaced!(elastic_ips, o, "ElasticIP")
                }
                Object::ElasticIPAttachment(mut o) => {
                    o.metadata.namespace.get_or_insert_with(|| "default".into());
                    add_namespaced!(elastic_ip_attachments, o, "ElasticIPAttachment")
                }
            }
            Ok(())
        })
    }

    /// Admits a Pod (L2-19, L2-24, L2-26), applying the mutation of L2-27.
    pub fn create_pod(&self, mut pod: PodRecord) -> Result<(), StoreError> {
        self.write(|w| {
            admission::admit(admission::Request::CreatePod(&pod), &w.objects)?;
            if let Some(policy) = admission::dns_policy(&pod, &w.objects) {
                pod.dns_policy = policy;
            }
            w.pods
                .retain(|p| !(p.namespace == pod.namespace && p.name == pod.name));
            if pod.created.is_empty() {
                // Creation order, for the oldest-first choices (EIP-20).
                w.pods_admitted += 1;
                pod.created = format!("{:020}", w.pods_admitted);
            }
            w.pods.push(pod);
            Ok(())
        })
    }

    /// Marks a Pod as being deleted (its `deletionTimestamp`), as the API server does
    /// at the start of a graceful deletion: its endpoints stop taking new connections.
    pub fn set_terminating(&self, namespace: &str, name: &str) {
        self.write(|w| {
            for p in &mut w.pods {
                if p.namespace == namespace && p.name == name {
                    p.terminating = true;
                }
            }
            let key = format!("{namespace}/{name}");
            if !w.objects.terminating_pods.contains(&key) {
                w.objects.terminating_pods.push(key);
            }
        });
    }

    pub fn delete_pod(&self, namespace: &str, name: &str) {
        self.write(|w| {
            w.pods
                .retain(|p| !(p.namespace == namespace && p.name == name));
            let key = format!("{namespace}/{name}");
            w.objects.terminating_pods.retain(|p| *p != key);
        });
    }

    /// The NICs of a Pod, as the controller wrote them.
    pub fn interfaces_of(&self, namespace: &str, pod: &str) -> Vec<NetworkInterface> {
        let g = self.lock();
        let mut nics: Vec<NetworkInterface> =
            g.0.objects
                .interfaces
                .iter()
                .filter(|n| {
                    n.metadata.namespace.as_deref() == Some(namespace) && n.spec.pod_ref.name == pod
                })
                .cloned()
                .collect();
        nics.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        nics
    }

    /// Registers a Node (or replaces its record), as a kubelet registers its Node.
    pub fn put_node(&self, node: NodeRecord) {
        self.write_if(|w| {
            if w.nodes.contains(&node) {
                return false;
            }
            w.nodes.retain(|n| n.name != node.name);
            w.nodes.push(node);
            w.objects.node_addresses = crate::cluster::node_addresses(&w.nodes);
            true
        });
    }

    /// A Node leaves the cluster.
    pub fn delete_node(&self, name: &str) {
        self.write_if(|w| {
            let before = w.nodes.len();
            w.nodes.retain(|n| n.name != name);
            w.objects.node_addresses = crate::cluster::node_addresses(&w.nodes);
            w.nodes.len() != before
        });
    }

    pub fn put_endpoint(&self, ep: NetworkEndpoint) {
        self.write(|w| {
            w.endpoints.retain(|e| {
                !(e.metadata.name == ep.metadata.name
                    && e.metadata.namespace == ep.metadata.namespace)
            });
            w.endpoints.push(ep);
        });
    }

    pub fn delete_endpoint(&self, namespace: &str, name: &str) {
        self.write(|w| {
            w.endpoints.retain(|e| {
                !(e.metadata.namespace.as_deref() == Some(namespace)
                    && e.metadata.name.as_deref() == Some(name))
            })
        });
    }
}

impl crate::cluster::Cluster for Store {
    fn read(&self) -> Result<(World, u64), crate::cluster::ClusterError> {
        Ok(Store::read(self))
    }

    fn wait(&self, seen: u64, timeout: Duration) -> Result<u64, crate::cluster::ClusterError> {
        Ok(Store::wait(self, seen, timeout))
    }

    fn put_endpoint(&self, endpoint: NetworkEndpoint) -> Result<(), crate::cluster::ClusterError> {
        Store::put_endpoint(self, endpoint);
        Ok(())
    }

    fn delete_endpoint(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), crate::cluster::ClusterError> {
        Store::delete_endpoint(self, namespace, name);
        Ok(())
    }

    fn set_attachment_condition(
        &self,
        name: &str,
        condition: crate::api::condition::Condition,
    ) -> Result<bool, crate::cluster::ClusterError> {
        Ok(self.write_if(|w| {
            let Some(a) = w
                .objects
                .external_network_attachments
                .iter_mut()
                .find(|a| a.metadata.name.as_deref() == Some(name))
            else {
                return false;
            };
            let status = a.status.get_or_insert_with(Default::default);
            crate::api::condition::set(&mut status.conditions, condition)
        }))
    }

    fn set_bgp_node_state(
        &self,
        node: &str,
        status: crate::api::bgpnodestate::BGPNodeStateStatus,
    ) -> Result<bool, crate::cluster::ClusterError> {
        Ok(self.write_if(|w| {
            w.objects
                .bgp_node_states
                .iter_mut()
                .find(|s| s.spec.node_name == node)
                .is_some_and(|s| {
                    let changed = s.status.as_ref() != Some(&status);
                    s.status = Some(status);
                    changed
                })
        }))
    }

    fn apply(&self, desired: &Desired) -> Result<bool, crate::cluster::ClusterError> {
        // The same writes, by the same rules, as the Kubernetes backend's
        // (`cluster::plan`); the default Subnet judged by this store's admission.
        let admit = |s: &crate::api::Subnet, w: &World| {
            validate::validate_subnet_create(s, &w.objects).map_err(|e| e.to_string())
        };
        Ok(self.write_if(|w| {
            let writes = crate::cluster::plan(w, desired);
            crate::cluster::apply_to(w, &writes, &admit)
        }))
    }
}
