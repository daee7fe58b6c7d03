//! The watch caches of the Kubernetes backend: one kube-rs reflector store per kind,
//! filled by the watch that the backend starts with it. A read builds the [`World`] from
//! them without an API call; the API is listed only when a watch starts, and again only
//! when the server says the watch's resourceVersion expired (410 Gone), which the
//! watcher handles by itself. Reads used to list every kind after every event: O(cluster)
//! traffic per change, per component.
//!
//! The trade-off, as with every informer-based controller: a read is as fresh as the
//! watch. While a watch is interrupted (logged, and retried with backoff) reads serve
//! what it last delivered; the webhook's overlap rules then judge against that, and the
//! controller's own writes (server-side apply, creations that fail on a conflict) stay
//! the authority on what exists.
use std::{
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{
    core::v1::{Node, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;

use super::pod_record;
use crate::{
    api::{
        ARPAdvertisement, AddressPool, BGPAdvertisement, BGPNodeState, BGPPeer, ElasticIP,
        ElasticIPAttachment, EndpointSliceRecord, ExternalNetwork, ExternalNetworkAttachment,
        L2Network, NATGateway, NetworkACL, NetworkEndpoint, NetworkInterface, NodeRecord,
        RouteTable, SecurityGroup, ServiceRecord, Subnet, TransitGateway, Vpc, VpcPeering,
    },
    cluster::{ClusterError, Scope, Snapshot, World, snapshot_kinds},
};

/// Moves after every change a cache applies; `Cluster::wait` blocks on it.
pub(super) type Generation = Arc<(Mutex<u64>, Condvar)>;

pub(super) fn bump(generation: &Generation) {
    let (lock, cv) = &**generation;
    *lock.lock().expect("generation lock") += 1;
    cv.notify_all();
}

/// What every cached kind is: a Kubernetes object without dynamic type, readable from
/// the watch and shared with the watch's task.
pub(super) trait Kind:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}
impl<K> Kind for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// One kind's cache: the reflector store, and how its watch is doing.
pub(super) struct Cache<K: Kind> {
    store: Store<K>,
    /// Set once the first list is in the store: reads wait for it.
    ready: Arc<AtomicBool>,
    /// The watch's last error until its next event: a cache that never filled says why
    /// (a role without `list`, an API that is not there).
    error: Arc<Mutex<Option<String>>>,
    /// Lists made so far (the first one, then one per expired watch).
    lists: Arc<AtomicU64>,
    /// The highest resourceVersion any event of the watch carried (an object applied,
    /// listed or deleted): a write of this process is in the cache once this reaches
    /// the write's version, whatever happened to the object since (deleted by its
    /// finalizer's removal, recreated by someone else).
    seen: Arc<AtomicU64>,
}

impl<K: Kind> Cache<K> {
    /// Starts the watch (of the objects matching `fields`, when given) on `rt`; it runs
    /// as long as the runtime.
    fn start(
        rt: &tokio::runtime::Runtime,
        client: &Client,
        generation: &Generation,
        fields: Option<&str>,
    ) -> Self {
        let writer = reflector::store::Writer::<K>::default();
        let cache = Cache {
            store: writer.as_reader(),
            ready: Arc::default(),
            error: Arc::default(),
            lists: Arc::default(),
            seen: Arc::default(),
        };
        let api: Api<K> = Api::all(client.clone());
        let mut config = watcher::Config::default();
        if let Some(f) = fields {
            config = config.fields(f);
        }
        let (ready, error, lists, seen) = (
            cache.ready.clone(),
            cache.error.clone(),
            cache.lists.clone(),
            cache.seen.clone(),
        );
        let generation = generation.clone();
        let kind = K::plural(&()).into_owned();
        // Nothing reads managedFields; they are most of a small object's size.
        let stream = watcher(api, config)
            .modify(|o: &mut K| o.meta_mut().managed_fields = None)
            .default_backoff();
        rt.spawn(async move {
            reflector::reflector(writer, stream)
                .for_each(|event| {
                    if let Ok(
                        watcher::Event::Apply(o)
                        | watcher::Event::Delete(o)
                        | watcher::Event::InitApply(o),
                    ) = &event
                        && let Some(v) = o.resource_version().and_then(|v| v.parse::<u64>().ok())
                    {
                        seen.fetch_max(v, Ordering::AcqRel);
                    }
                    match event {
                        Ok(watcher::Event::Init) => {
                            if lists.fetch_add(1, Ordering::Relaxed) > 0 {
                                tracing::info!(%kind, "the watch expired or restarted; listing again");
                            }
                        }
                        Ok(watcher::Event::InitApply(_)) => {}
                        Ok(event) => {
                            if matches!(event, watcher::Event::InitDone) {
                                ready.store(true, Ordering::Release);
                            }
                            *error.lock().expect("error lock") = None;
                            bump(&generation);
                        }
                        Err(e) => {
                            tracing::warn!(%kind, error = %e, "watch interrupted; it resumes by itself");
                            *error.lock().expect("error lock") = Some(e.to_string());
                        }
                    }
                    futures::future::ready(())
                })
                .await;
        });
        cache
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Why the cache is not filled yet, when its watch said.
    fn error(&self) -> Option<String> {
        self.error.lock().expect("error lock").clone()
    }

    /// Every cached object, in the order a list returns them (by namespace, then name),
    /// so that the reconcilers see the order they always saw.
    fn objects(&self) -> Vec<K> {
        let mut all: Vec<K> = self.store.state().iter().map(|o| (**o).clone()).collect();
        all.sort_by_key(|a| (a.namespace(), a.name_any()));
        all
    }

    fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut key = ObjectRef::<K>::new(name);
        if let Some(ns) = namespace {
            key = key.within(ns);
        }
        self.store.get(&key)
    }

    /// A check that the cache shows `written` (an API server's answer to a write): its
    /// watch has carried that resourceVersion or a later one (so an object deleted or
    /// recreated since counts as shown), or it holds the object at that version or
    /// later (a version that does not read as a number only matches itself).
    pub(super) fn shows(&self, written: &K) -> Expectation {
        let store = self.clone();
        let (namespace, name) = (written.namespace(), written.name_any());
        let version = written.resource_version().unwrap_or_default();
        let numeric = version.parse::<u64>().ok();
        Box::new(move || {
            numeric.is_some_and(|v| store.seen.load(Ordering::Acquire) >= v)
                || store
                    .get(namespace.as_deref(), &name)
                    .is_some_and(|o| not_older(&o.resource_version().unwrap_or_default(), &version))
        })
    }

    /// A check that the cache shows the object deleted: gone, being deleted (it waits
    /// for finalizers), or replaced by another object of the same name (someone made it
    /// again: not the one this process deleted).
    pub(super) fn shows_deleted(&self, namespace: Option<&str>, name: &str) -> Expectation {
        let store = self.clone();
        let (namespace, name) = (namespace.map(str::to_owned), name.to_owned());
        let deleted_uid = store
            .get(namespace.as_deref(), &name)
            .and_then(|o| o.meta().uid.clone());
        Box::new(move || {
            store.get(namespace.as_deref(), &name).is_none_or(|o| {
                o.meta().deletion_timestamp.is_some()
                    || (deleted_uid.is_some() && o.meta().uid != deleted_uid)
            })
        })
    }
}

impl<K: Kind> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Cache {
            store: self.store.clone(),
            ready: self.ready.clone(),
            error: self.error.clone(),
            lists: self.lists.clone(),
            seen: self.seen.clone(),
        }
    }
}

/// Whether resourceVersion `have` is `want` or later. Kubernetes calls them opaque; every
/// server in use (etcd's revisions) makes them increasing integers, and an unreadable
/// one only matches itself.
fn not_older(have: &str, want: &str) -> bool {
    match (have.parse::<u64>(), want.parse::<u64>()) {
        (Ok(h), Ok(w)) => h >= w,
        _ => have == want,
    }
}

/// Something a read waits to see in the caches: a write of this process.
pub(super) type Expectation = Box<dyn Fn() -> bool + Send>;

/// A cache per kind: the [`Snapshot`]'s (from its registry), Pods, NetworkEndpoints,
/// Services and EndpointSlices (every component reads the last two whole: a Node's
/// Pods reach every Service).
macro_rules! define_caches {
    ($($field:ident: $ty:ident = $scope:ident, $origin:ident),* $(,)?) => {
        pub(super) struct Caches {
            $(pub(super) $field: Cache<$ty>,)*
            pub(super) pods: Cache<Pod>,
            pub(super) endpoints: Cache<NetworkEndpoint>,
            pub(super) services: Cache<Service>,
            pub(super) endpoint_slices: Cache<EndpointSlice>,
            pub(super) nodes: Cache<Node>,
        }

        impl Caches {
            /// Starts every watch. `node` is a node daemon's `spec.nodeName=<node>`
            /// selector, for Pods and the kinds of [`Scope::Node`]; `nic_node` the same
            /// for NetworkInterfaces, when the API can select them so.
            pub(super) fn start(
                rt: &tokio::runtime::Runtime,
                client: &Client,
                generation: &Generation,
                node: Option<&str>,
                nic_node: Option<&str>,
            ) -> Self {
                let scoped = |scope: Scope| match scope {
                    Scope::All => None,
                    Scope::Node => nic_node,
                };
                Caches {
                    $($field: Cache::start(rt, client, generation, scoped(Scope::$scope)),)*
                    pods: Cache::start(rt, client, generation, node),
                    endpoints: Cache::start(rt, client, generation, None),
                    services: Cache::start(rt, client, generation, None),
                    endpoint_slices: Cache::start(rt, client, generation, None),
                    nodes: Cache::start(rt, client, generation, None),
                }
            }

            /// Each kind's name, readiness and last watch error.
            fn states(&self) -> Vec<(String, bool, Option<String>)> {
                vec![
                    $(($ty::plural(&()).into_owned(), self.$field.is_ready(), self.$field.error()),)*
                    ("pods".into(), self.pods.is_ready(), self.pods.error()),
                    ("networkendpoints".into(), self.endpoints.is_ready(), self.endpoints.error()),
                    ("services".into(), self.services.is_ready(), self.services.error()),
                    ("endpointslices".into(), self.endpoint_slices.is_ready(), self.endpoint_slices.error()),
                    ("nodes".into(), self.nodes.is_ready(), self.nodes.error()),
                ]
            }

            /// Lists made by every watch so far (one each at start, then one per
            /// expired watch).
            pub(super) fn lists(&self) -> u64 {
                [
                    $(&self.$field.lists,)*
                    &self.pods.lists,
                    &self.endpoints.lists,
                    &self.services.lists,
                    &self.endpoint_slices.lists,
                    &self.nodes.lists,
                ]
                    .iter()
                    .map(|l| l.load(Ordering::Relaxed))
                    .sum()
            }

            /// The cached objects as one [`World`].
            pub(super) fn world(&self, service_cidrs: &[ipnet::Ipv4Net]) -> World {
                let pods = self.pods.objects();
                let nodes: Vec<NodeRecord> =
                    self.nodes.objects().iter().map(NodeRecord::from_k8s).collect();
                World {
                    objects: Snapshot {
                        $($field: self.$field.objects(),)*
                        terminating_pods: pods
                            .iter()
                            .filter(|p| p.metadata.deletion_timestamp.is_some())
                            .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
                            .collect(),
                        service_cidrs: service_cidrs.to_vec(),
                        node_addresses: crate::cluster::node_addresses(&nodes),
                    },
                    endpoints: self.endpoints.objects(),
                    pods: pods.iter().map(pod_record).collect(),
                    pods_admitted: 0,
                    services: self.services.objects().iter().map(ServiceRecord::from_k8s).collect(),
                    endpoint_slices: self
                        .endpoint_slices
                        .objects()
                        .iter()
                        .map(EndpointSliceRecord::from_k8s)
                        .collect(),
                    nodes,
                }
            }
        }
    };
}
snapshot_kinds!(define_caches);

/// How a kind finds its cache, so that the generic writes can expect their answers
/// there.
pub(super) trait Cached: Kind {
    fn cache(caches: &Caches) -> &Cache<Self>;
}

macro_rules! define_cached {
    ($($field:ident: $ty:ident = $scope:ident, $origin:ident),* $(,)?) => {
        $(impl Cached for $ty {
            fn cache(caches: &Caches) -> &Cache<Self> {
                &caches.$field
            }
        })*
    };
}
snapshot_kinds!(define_cached);

impl Cached for NetworkEndpoint {
    fn cache(caches: &Caches) -> &Cache<Self> {
        &caches.endpoints
    }
}

impl Caches {
    /// Waits until every cache holds its first list. A watch that failed before it
    /// filled its cache (no `list` in the role, no such kind) fails the read with its
    /// error at once, as the lists of a read did; one that says nothing fails it after
    /// `within`.
    pub(super) fn wait_ready(
        &self,
        generation: &Generation,
        within: Duration,
    ) -> Result<(), ClusterError> {
        let deadline = Instant::now() + within;
        loop {
            let states = self.states();
            if let Some((kind, _, Some(e))) =
                states.iter().find(|(_, ready, e)| !ready && e.is_some())
            {
                return Err(ClusterError::Refused(format!("{kind}: {e}")));
            }
            let waiting: Vec<&str> = states
                .iter()
                .filter(|(_, ready, _)| !ready)
                .map(|(k, _, _)| k.as_str())
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ClusterError::Unreachable {
                    at: "the Kubernetes API".into(),
                    cause: format!("no first list of {} within {within:?}", waiting.join(", ")),
                });
            }
            // Errors do not move the generation: look again at least every 100 ms.
            let (lock, cv) = &**generation;
            let g = lock.lock().expect("generation lock");
            let _ = cv
                .wait_timeout(g, left.min(Duration::from_millis(100)))
                .expect("generation lock");
        }
    }
}
