//! The [`Cluster`] of a real cluster: the Kubernetes API through kube-rs. Watches of
//! every kind the reconcilers and daemons look at fill caches (`cache`), which reads are
//! served from and which move the generation that `wait` blocks on; writes go through
//! server-side apply (objects) and the status subresource (statuses), as field manager
//! `juneau-controller` or `juneau-node`, and the next read waits until the caches show
//! them. Synchronous like the other backends: it owns a small runtime, and callers on
//! any thread block on it.
use std::{
    sync::{Arc, Condvar, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde::Serialize;

mod apply;
mod cache;
mod lease;
use crate::{
    api::{
        ExternalNetworkAttachment, NetworkEndpoint, NetworkInterface, PodRecord,
        condition::Condition,
    },
    cluster::{Cluster, ClusterError, Desired, World},
};
use cache::{Cached, Caches, Expectation, Generation};

/// This process's writes the caches may not show yet, numbered in the order made.
#[derive(Default)]
struct Pending {
    next: u64,
    writes: Vec<(u64, Expectation)>,
}

/// How long a read waits for the caches to show this process's own writes: the watch
/// events of a write arrive within milliseconds on a healthy API server; past this the
/// read goes on without them (and says so) rather than stall a daemon.
const OWN_WRITES_WITHIN: Duration = Duration::from_secs(2);
/// How long the first read waits for every watch's first list.
const FIRST_LIST_WITHIN: Duration = Duration::from_secs(30);

/// Field manager of what the controller writes.
pub const CONTROLLER: &str = "juneau-controller";
/// Field manager of what the node daemons write.
pub const NODE: &str = "juneau-node";

pub struct KubeCluster {
    client: Client,
    rt: tokio::runtime::Runtime,
    manager: &'static str,
    generation: Generation,
    caches: Caches,
    /// This process's writes that the caches may not show yet: the next read waits for
    /// them, so a process always reads what it wrote (without listing again).
    pending: Mutex<Pending>,
    /// The last [`World`] built from the caches and the generation it was built at:
    /// reads between two watch events (every admission request, every CNI poll) do not
    /// copy the caches again.
    cache: Mutex<Option<(u64, World)>>,
    /// The leader-election Lease's resourceVersion when this replica last saw it
    /// change, and when.
    lease_seen: Mutex<Option<(String, Instant)>>,
    /// Once this replica takes part in an election: the instant until which its
    /// writes are safe (its last successful renewal plus the Lease's duration, on its
    /// own clock). Writes after it are refused, so a pass that outlives the
    /// leadership stops instead of racing the new leader.
    write_fence: Mutex<Option<Instant>>,
    /// The cluster's Service CIDRs (kube-apiserver `--service-cluster-ip-range`), which
    /// the API does not list to everyone: given by the operator.
    service_cidrs: Vec<ipnet::Ipv4Net>,
}

fn refused(what: &str) -> impl Fn(kube::Error) -> ClusterError + '_ {
    move |e| ClusterError::Refused(format!("{what}: {e}"))
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// What the components need of a Pod.
pub(super) fn pod_record(p: &Pod) -> PodRecord {
    let spec = p.spec.clone().unwrap_or_default();
    PodRecord {
        namespace: p.namespace().unwrap_or_default(),
        name: p.name_any(),
        node: spec.node_name.unwrap_or_default(),
        annotations: p.metadata.annotations.clone().unwrap_or_default(),
        labels: p.metadata.labels.clone().unwrap_or_default(),
        ports: spec
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| Some((p.name.clone()?, u16::try_from(p.container_port).ok()?)))
            .collect(),
        dns_policy: spec.dns_policy.unwrap_or_default(),
        terminating: p.metadata.deletion_timestamp.is_some(),
        created: p
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok())
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    }
}

impl KubeCluster {
    /// A client from the kubeconfig (`KUBECONFIG` or `~/.kube/config`) or the Pod's
    /// service account; `manager` is the field manager of the writes. It reads the
    /// whole cluster (the controller, the webhook).
    pub fn connect(
        kubeconfig: Option<&std::path::Path>,
        manager: &'static str,
    ) -> Result<Self, ClusterError> {
        Self::connect_scoped(kubeconfig, manager, None)
    }

    /// [`KubeCluster::connect`] for a node daemon: of the kinds that belong to a Node
    /// (Pods, NetworkInterfaces) it lists and watches only `node`'s, by field selector
    /// (`spec.nodeName`, a selectable field of the NetworkInterface CRD), so its reads
    /// grow with its own Pods, not with the cluster. Segments and every Node's
    /// endpoints stay whole: the remote lists need them.
    pub fn connect_for_node(
        kubeconfig: Option<&std::path::Path>,
        manager: &'static str,
        node: &str,
    ) -> Result<Self, ClusterError> {
        Self::connect_scoped(kubeconfig, manager, Some(format!("spec.nodeName={node}")))
    }

    /// The field selector for NetworkInterfaces, when the API takes it: the CRD's
    /// `selectableFields` needs Kubernetes 1.31 or later and a CRD applied from this
    /// version. Otherwise every Node's NICs are read (and a warning says why).
    fn nic_fields(
        rt: &tokio::runtime::Runtime,
        client: &Client,
        fields: Option<&str>,
    ) -> Option<String> {
        let fields = fields?;
        let api: Api<NetworkInterface> = Api::all(client.clone());
        match rt.block_on(api.list(&ListParams::default().fields(fields).limit(1))) {
            Err(kube::Error::Api(s)) if s.code == 400 => {
                tracing::warn!(error = %s.message, "NetworkInterfaces cannot be selected by spec.nodeName (a CRD older than this version, or Kubernetes before 1.31); reading every Node's");
                None
            }
            // Anything else (the API not reachable yet) says nothing about the CRD: the
            // selector stays, and the reads report the error themselves.
            _ => Some(fields.to_owned()),
        }
    }

    fn connect_scoped(
        kubeconfig: Option<&std::path::Path>,
        manager: &'static str,
        node_fields: Option<String>,
    ) -> Result<Self, ClusterError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("juneau-kube")
            .enable_all()
            .build()
            .map_err(|e| ClusterError::Unreachable {
                at: "the Kubernetes API".into(),
                cause: format!("no runtime: {e}"),
            })?;
        let agent = match &node_fields {
            Some(f) => format!("{manager}/{}", f.trim_start_matches("spec.nodeName=")),
            None => manager.to_owned(),
        };
        let client = rt.block_on(async {
            let mut config = match kubeconfig {
                Some(path) => {
                    let kc =
                        kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
                    kube::Config::from_custom_kubeconfig(kc, &Default::default())
                        .await
                        .map_err(|e| e.to_string())?
                }
                None => kube::Config::infer().await.map_err(|e| e.to_string())?,
            };
            // The component (and a daemon's Node) in the API server's audit log and
            // request logs: which client makes which requests is measurable.
            let agent = http::HeaderValue::from_str(&agent).map_err(|e| e.to_string())?;
            config.headers.push((http::header::USER_AGENT, agent));
            Client::try_from(config).map_err(|e| e.to_string())
        });
        let client = client.map_err(|cause| ClusterError::Unreachable {
            at: "the Kubernetes API".into(),
            cause,
        })?;
        let generation: Generation = Arc::new((Mutex::new(1), Condvar::new()));
        let node = node_fields.as_deref();
        let nic_fields = Self::nic_fields(&rt, &client, node);
        let caches = Caches::start(&rt, &client, &generation, node, nic_fields.as_deref());
        Ok(Self {
            client,
            rt,
            manager,
            generation,
            caches,
            pending: Mutex::default(),
            cache: Mutex::new(None),
            lease_seen: Mutex::new(None),
            write_fence: Mutex::new(None),
            service_cidrs: Vec::new(),
        })
    }

    /// The Service CIDRs the admission rules keep L2Networks out of.
    pub fn with_service_cidrs(mut self, cidrs: Vec<ipnet::Ipv4Net>) -> Self {
        self.service_cidrs = cidrs;
        self
    }

    /// Lists every watch made so far: one per kind at start, then one per watch that
    /// expired (410 Gone). What the tests and the benchmark count.
    pub fn lists_made(&self) -> u64 {
        self.caches.lists()
    }

    fn generation(&self) -> u64 {
        *self.generation.0.lock().expect("generation lock")
    }

    /// Remembers a write the caches are to show before the next read.
    fn expect(&self, e: Expectation) {
        let mut p = self.pending.lock().expect("pending lock");
        p.next += 1;
        let id = p.next;
        p.writes.push((id, e));
    }

    /// Waits (up to [`OWN_WRITES_WITHIN`]) until the caches show every write of this
    /// process made before this read; the World built before them is dropped. Several
    /// threads may read at once: each waits for the writes pending when it began, and
    /// a write is taken off the list only once it shows (or, past the wait, by the
    /// reader that gives up on it), so no reader is handed a World without a write
    /// another reader is still waiting for.
    fn settle_own_writes(&self) {
        let mine: Vec<u64> = {
            let p = self.pending.lock().expect("pending lock");
            p.writes.iter().map(|(id, _)| *id).collect()
        };
        if mine.is_empty() {
            return;
        }
        let deadline = Instant::now() + OWN_WRITES_WITHIN;
        loop {
            let waiting = {
                let mut p = self.pending.lock().expect("pending lock");
                p.writes.retain(|(_, shown)| !shown());
                let waiting = p.writes.iter().filter(|(id, _)| mine.contains(id)).count();
                if waiting > 0 && Instant::now() >= deadline {
                    p.writes.retain(|(id, _)| !mine.contains(id));
                    tracing::warn!(writes = waiting, within = ?OWN_WRITES_WITHIN, "the watches do not show this process's own writes yet; reading without them");
                    0
                } else {
                    waiting
                }
            };
            if waiting == 0 {
                break;
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            let (lock, cv) = &*self.generation;
            let g = lock.lock().expect("generation lock");
            let _ = cv
                .wait_timeout(g, wait.min(Duration::from_millis(20)))
                .expect("generation lock");
        }
        *self.cache.lock().expect("cache lock") = None;
    }

    /// The cached World (built again once a watch moved), with this process's writes.
    fn world(&self) -> Result<(World, u64), ClusterError> {
        self.caches
            .wait_ready(&self.generation, FIRST_LIST_WITHIN)?;
        self.settle_own_writes();
        // The generation is taken before the caches are copied, so a change during the
        // copy moves it past what is kept and the next read copies again.
        let generation = self.generation();
        let mut kept = self.cache.lock().expect("cache lock");
        if let Some((at, world)) = kept.as_ref()
            && *at == generation
        {
            return Ok((world.clone(), generation));
        }
        let world = self.caches.world(&self.service_cidrs);
        *kept = Some((generation, world.clone()));
        Ok((world, generation))
    }

    fn params(&self) -> PatchParams {
        PatchParams::apply(self.manager).force()
    }

    /// Server-side apply of a whole object (what this manager owns of it).
    async fn apply_object<K>(&self, api: &Api<K>, obj: &K) -> Result<(), ClusterError>
    where
        K: Cached + Serialize,
    {
        self.may_write()?;
        let mut obj = obj.clone();
        let meta = obj.meta_mut();
        meta.resource_version = None;
        meta.managed_fields = None;
        meta.uid = None;
        meta.creation_timestamp = None;
        let mut v = serde_json::to_value(&obj).map_err(|e| ClusterError::Refused(e.to_string()))?;
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "apiVersion".into(),
                K::api_version(&Default::default()).into(),
            );
            o.insert("kind".into(), K::kind(&Default::default()).into());
            o.remove("status");
        }
        let written = api
            .patch(&obj.name_any(), &self.params(), &Patch::Apply(&v))
            .await
            .map_err(refused(&format!("apply {}", obj.name_any())))?;
        self.expect(K::cache(&self.caches).shows(&written));
        Ok(())
    }

    async fn apply_status<K>(
        &self,
        api: &Api<K>,
        name: &str,
        status: &impl Serialize,
    ) -> Result<(), ClusterError>
    where
        K: Cached,
    {
        self.may_write()?;
        let patch = serde_json::json!({
            "apiVersion": K::api_version(&Default::default()),
            "kind": K::kind(&Default::default()),
            "status": status,
        });
        let written = api
            .patch_status(name, &self.params(), &Patch::Apply(&patch))
            .await
            .map_err(refused(&format!("status of {name}")))?;
        self.expect(K::cache(&self.caches).shows(&written));
        Ok(())
    }

    /// Creates `obj` unless it exists; true when this call made it.
    async fn create_once<K>(&self, api: &Api<K>, obj: &K) -> Result<bool, ClusterError>
    where
        K: Cached + Serialize,
    {
        self.may_write()?;
        match api.create(&PostParams::default(), obj).await {
            Ok(written) => {
                self.expect(K::cache(&self.caches).shows(&written));
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(refused(&format!("creation of {}", obj.name_any()))(e)),
        }
    }
}

impl Cluster for KubeCluster {
    fn read(&self) -> Result<(World, u64), ClusterError> {
        self.world()
    }

    fn wait(&self, seen: u64, timeout: Duration) -> Result<u64, ClusterError> {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &*self.generation;
        let mut g = lock.lock().expect("generation lock");
        while *g <= seen {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = cv.wait_timeout(g, left).expect("generation lock").0;
        }
        Ok(*g)
    }

    fn put_endpoint(&self, endpoint: NetworkEndpoint) -> Result<(), ClusterError> {
        let ns = endpoint.namespace().unwrap_or_default();
        let api: Api<NetworkEndpoint> = Api::namespaced(self.client.clone(), &ns);
        self.rt.block_on(self.apply_object(&api, &endpoint))
    }

    fn delete_endpoint(&self, namespace: &str, name: &str) -> Result<(), ClusterError> {
        let api: Api<NetworkEndpoint> = Api::namespaced(self.client.clone(), namespace);
        match self.rt.block_on(api.delete(name, &DeleteParams::default())) {
            Ok(_) => {
                self.expect(self.caches.endpoints.shows_deleted(Some(namespace), name));
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(refused(&format!("delete endpoint {namespace}/{name}"))(e)),
        }
    }

    fn apply(&self, desired: &Desired) -> Result<bool, ClusterError> {
        let (world, _) = self.world()?;
        self.rt.block_on(self.apply_desired(&world, desired))
    }

    fn set_bgp_node_state(
        &self,
        node: &str,
        status: crate::api::bgpnodestate::BGPNodeStateStatus,
    ) -> Result<bool, ClusterError> {
        let (world, _) = self.world()?;
        let Some(s) = world
            .objects
            .bgp_node_states
            .iter()
            .find(|s| s.spec.node_name == node)
        else {
            return Ok(false);
        };
        if s.status.as_ref() == Some(&status) {
            return Ok(false);
        }
        let api: Api<crate::api::BGPNodeState> = Api::all(self.client.clone());
        let name = s.metadata.name.clone().unwrap_or_default();
        self.rt.block_on(self.apply_status(&api, &name, &status))?;
        Ok(true)
    }

    fn set_attachment_condition(
        &self,
        name: &str,
        condition: Condition,
    ) -> Result<bool, ClusterError> {
        let (world, _) = self.world()?;
        let Some(a) = world.objects.external_network_attachment(name) else {
            return Ok(false);
        };
        // The conditions alone, the whole list as read: the controller's are kept (the
        // list is replaced whole), and it carries this one over in its own writes.
        // `assignedIP` is the controller's field: never written from this cache.
        let mut conditions = a.status.clone().unwrap_or_default().conditions;
        if !crate::api::condition::set(&mut conditions, condition) {
            return Ok(false);
        }
        let api: Api<ExternalNetworkAttachment> = Api::all(self.client.clone());
        let status = serde_json::json!({ "conditions": conditions });
        self.rt.block_on(self.apply_status(&api, name, &status))?;
        Ok(true)
    }
}
