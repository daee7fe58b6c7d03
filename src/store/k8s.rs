//! The [`Cluster`] of a real cluster: the Kubernetes API through kube-rs. Reads list
//! every kind the reconcilers and daemons look at; watches on the same kinds move the
//! generation that `wait` blocks on; writes go through server-side apply (objects) and
//! the status subresource (statuses), as field manager `juneau-controller` or
//! `juneau-node`. Synchronous like the other backends: it owns a small runtime, and
//! callers on any thread block on it.
use std::{
    collections::BTreeMap,
    sync::{Arc, Condvar, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde::{Serialize, de::DeserializeOwned};

mod external;
mod lease;
use crate::{
    admission::Snapshot,
    api::{
        ARPAdvertisement, AddressPool, DEFAULT_VPC, ElasticIP, ElasticIPAttachment,
        ExternalNetwork, L2Network, NetworkACL, NetworkEndpoint, NetworkInterface, PodRecord,
        RouteTable, SecurityGroup, Subnet, TransitGateway, Vpc, VpcPeering,
    },
    cluster::{Cluster, ClusterError, Desired, World},
};

/// Field manager of what the controller writes.
pub const CONTROLLER: &str = "juneau-controller";
/// Field manager of what the node daemons write.
pub const NODE: &str = "juneau-node";

pub struct KubeCluster {
    client: Client,
    rt: tokio::runtime::Runtime,
    manager: &'static str,
    generation: Arc<(Mutex<u64>, Condvar)>,
    /// The last read and the generation it was read at: reads between two watch events
    /// (every admission request, every CNI poll) cost no API call.
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
    service_cidrs: Vec<String>,
    /// `spec.nodeName=<node>` for a node daemon's reads of Pods, and of
    /// NetworkInterfaces when the API can select them so.
    node_fields: Option<String>,
    nic_fields: Option<String>,
}

fn refused(what: &str) -> impl Fn(kube::Error) -> ClusterError + '_ {
    move |e| ClusterError::Refused(format!("{what}: {e}"))
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Every object of a kind, in every namespace (those matching `fields`, a field
/// selector, when given).
async fn list<K>(client: &Client, fields: Option<&str>) -> Result<Vec<K>, ClusterError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let mut params = ListParams::default();
    if let Some(f) = fields {
        params = params.fields(f);
    }
    Ok(api
        .list(&params)
        .await
        .map_err(refused(&K::plural(&K::DynamicType::default())))?
        .items)
}

/// What the components need of a Pod.
fn pod_record(p: &Pod) -> PodRecord {
    let spec = p.spec.clone().unwrap_or_default();
    PodRecord {
        namespace: p.namespace().unwrap_or_default(),
        name: p.name_any(),
        node: spec.node_name.unwrap_or_default(),
        annotations: p.metadata.annotations.clone().unwrap_or_default(),
        labels: p.metadata.labels.clone().unwrap_or_default(),
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

/// Bumps the generation on every event of a watch (of the objects matching `fields`,
/// when given), for as long as it runs.
fn watch_into<K>(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    generation: &Arc<(Mutex<u64>, Condvar)>,
    fields: Option<&str>,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let generation = generation.clone();
    let mut config = watcher::Config::default();
    if let Some(f) = fields {
        config = config.fields(f);
    }
    rt.spawn(async move {
        watcher(api, config)
            .default_backoff()
            .for_each(|event| {
                if let Err(e) = &event {
                    tracing::warn!(error = %e, "watch interrupted; it resumes by itself");
                }
                let (lock, cv) = &*generation;
                *lock.lock().expect("generation lock") += 1;
                cv.notify_all();
                futures::future::ready(())
            })
            .await;
    });
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
        let client = rt.block_on(async {
            let config = match kubeconfig {
                Some(path) => {
                    let kc =
                        kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
                    kube::Config::from_custom_kubeconfig(kc, &Default::default())
                        .await
                        .map_err(|e| e.to_string())?
                }
                None => kube::Config::infer().await.map_err(|e| e.to_string())?,
            };
            Client::try_from(config).map_err(|e| e.to_string())
        });
        let client = client.map_err(|cause| ClusterError::Unreachable {
            at: "the Kubernetes API".into(),
            cause,
        })?;
        let generation = Arc::new((Mutex::new(1), Condvar::new()));
        // Every kind `read_all` lists, with the same selectors, so that no change goes
        // unnoticed.
        let node = node_fields.as_deref();
        let nic_fields = Self::nic_fields(&rt, &client, node);
        watch_into::<Pod>(&rt, &client, &generation, node);
        watch_into::<L2Network>(&rt, &client, &generation, None);
        watch_into::<Subnet>(&rt, &client, &generation, None);
        watch_into::<Vpc>(&rt, &client, &generation, None);
        watch_into::<RouteTable>(&rt, &client, &generation, None);
        watch_into::<NetworkInterface>(&rt, &client, &generation, nic_fields.as_deref());
        watch_into::<NetworkEndpoint>(&rt, &client, &generation, None);
        watch_into::<VpcPeering>(&rt, &client, &generation, None);
        watch_into::<TransitGateway>(&rt, &client, &generation, None);
        watch_into::<NetworkACL>(&rt, &client, &generation, None);
        watch_into::<SecurityGroup>(&rt, &client, &generation, None);
        watch_into::<ExternalNetwork>(&rt, &client, &generation, None);
        watch_into::<AddressPool>(&rt, &client, &generation, None);
        watch_into::<ElasticIP>(&rt, &client, &generation, None);
        watch_into::<ElasticIPAttachment>(&rt, &client, &generation, None);
        watch_into::<ARPAdvertisement>(&rt, &client, &generation, None);
        Ok(Self {
            client,
            rt,
            manager,
            generation,
            cache: Mutex::new(None),
            lease_seen: Mutex::new(None),
            write_fence: Mutex::new(None),
            service_cidrs: Vec::new(),
            node_fields,
            nic_fields,
        })
    }

    /// The Service CIDRs the admission rules keep L2Networks out of.
    pub fn with_service_cidrs(mut self, cidrs: Vec<String>) -> Self {
        self.service_cidrs = cidrs;
        self
    }

    /// After our own writes: the next read lists again instead of waiting for their
    /// watch events, so a process always reads what it wrote.
    fn forget_read(&self) {
        *self.cache.lock().expect("cache lock") = None;
    }

    fn generation(&self) -> u64 {
        *self.generation.0.lock().expect("generation lock")
    }

    async fn read_all(&self) -> Result<World, ClusterError> {
        let c = &self.client;
        let node = self.node_fields.as_deref();
        let pods: Vec<Pod> = list(c, node).await?;
        Ok(World {
            objects: Snapshot {
                vpcs: list(c, None).await?,
                peerings: list::<VpcPeering>(c, None).await?,
                transit_gateways: list::<TransitGateway>(c, None).await?,
                subnets: list(c, None).await?,
                l2networks: list(c, None).await?,
                route_tables: list::<RouteTable>(c, None).await?,
                network_acls: list::<NetworkACL>(c, None).await?,
                security_groups: list::<SecurityGroup>(c, None).await?,
                interfaces: list(c, self.nic_fields.as_deref()).await?,
                external_networks: list::<ExternalNetwork>(c, None).await?,
                address_pools: list::<AddressPool>(c, None).await?,
                elastic_ips: list::<ElasticIP>(c, None).await?,
                elastic_ip_attachments: list::<ElasticIPAttachment>(c, None).await?,
                arp_advertisements: list::<ARPAdvertisement>(c, None).await?,
                terminating_pods: pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_some())
                    .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
                    .collect(),
                service_cidrs: self.service_cidrs.clone(),
            },
            endpoints: list(c, None).await?,
            pods: pods.iter().map(pod_record).collect(),
            pods_admitted: 0,
        })
    }

    fn params(&self) -> PatchParams {
        PatchParams::apply(self.manager).force()
    }

    /// Server-side apply of a whole object (what this manager owns of it).
    async fn apply_object<K>(&self, api: &Api<K>, obj: &K) -> Result<(), ClusterError>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
        K::DynamicType: Default,
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
        api.patch(&obj.name_any(), &self.params(), &Patch::Apply(&v))
            .await
            .map_err(refused(&format!("apply {}", obj.name_any())))?;
        Ok(())
    }

    async fn apply_status<K>(
        &self,
        api: &Api<K>,
        name: &str,
        status: &impl Serialize,
    ) -> Result<(), ClusterError>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        self.may_write()?;
        let patch = serde_json::json!({
            "apiVersion": K::api_version(&Default::default()),
            "kind": K::kind(&Default::default()),
            "status": status,
        });
        api.patch_status(name, &self.params(), &Patch::Apply(&patch))
            .await
            .map_err(refused(&format!("status of {name}")))?;
        Ok(())
    }

    /// Creates `obj` unless it exists; true when this call made it.
    async fn create_once<K>(&self, api: &Api<K>, obj: &K) -> Result<bool, ClusterError>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
    {
        self.may_write()?;
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(refused(&format!("creation of {}", obj.name_any()))(e)),
        }
    }

    async fn apply_desired(&self, desired: &Desired) -> Result<bool, ClusterError> {
        let world = self.read_all().await?;
        let c = &self.client;
        let mut changed = false;
        // The default Vpc, then its Subnet (admitted only once the Vpc exists).
        if let Some(vpc) = &desired.default_vpc
            && world.objects.vpc(DEFAULT_VPC).is_none()
        {
            changed |= self.create_once(&Api::<Vpc>::all(c.clone()), vpc).await?;
        }
        if let Some(subnet) = &desired.default_subnet
            && world.objects.vpc(DEFAULT_VPC).is_some()
            && world.objects.subnet(DEFAULT_VPC).is_none()
        {
            changed |= self
                .create_once(&Api::<Subnet>::all(c.clone()), subnet)
                .await?;
        }
        let nets: Api<L2Network> = Api::all(c.clone());
        for l in &world.objects.l2networks {
            let name = l.name_any();
            if let Some(want) = desired.l2_status.get(&name)
                && l.status.as_ref() != Some(want)
            {
                self.apply_status(&nets, &name, want).await?;
                changed = true;
            }
        }
        let subnets: Api<Subnet> = Api::all(c.clone());
        for s in &world.objects.subnets {
            let name = s.name_any();
            if let Some(want) = desired.subnet_status.get(&name)
                && s.status.as_ref() != Some(want)
            {
                self.apply_status(&subnets, &name, want).await?;
                changed = true;
            }
        }
        changed |= self.apply_external(&world, desired).await?;
        let tables: Api<RouteTable> = Api::all(c.clone());
        for want in &desired.route_tables {
            // Only tables that still exist (one deleted meanwhile stays deleted), and only
            // the routes: the rest of the object is its owner's.
            let Some(have) = world
                .objects
                .route_tables
                .iter()
                .find(|t| t.name_any() == want.name_any())
            else {
                continue;
            };
            if have.spec.routes != want.spec.routes {
                let patch = serde_json::json!({
                    "apiVersion": RouteTable::api_version(&()),
                    "kind": RouteTable::kind(&()),
                    "metadata": {"name": want.name_any()},
                    "spec": {"routes": want.spec.routes},
                });
                self.may_write()?;
                tables
                    .patch(&want.name_any(), &self.params(), &Patch::Apply(&patch))
                    .await
                    .map_err(refused(&format!("routes of {}", want.name_any())))?;
                changed = true;
            }
        }
        let key = |n: &NetworkInterface| (n.namespace().unwrap_or_default(), n.name_any());
        let have: BTreeMap<_, &NetworkInterface> = world
            .objects
            .interfaces
            .iter()
            .map(|n| (key(n), n))
            .collect();
        for want in &desired.interfaces {
            let (ns, name) = key(want);
            let api: Api<NetworkInterface> = Api::namespaced(c.clone(), &ns);
            let current = have.get(&(ns.clone(), name.clone()));
            if current.map(|n| &n.spec) != Some(&want.spec) {
                self.apply_object(&api, want).await?;
                changed = true;
            }
            if current.and_then(|n| n.status.as_ref()) != want.status.as_ref()
                && let Some(status) = &want.status
            {
                self.apply_status(&api, &name, status).await?;
                changed = true;
            }
        }
        let wanted: std::collections::BTreeSet<_> = desired.interfaces.iter().map(key).collect();
        for gone in have.keys().filter(|k| !wanted.contains(*k)) {
            let api: Api<NetworkInterface> = Api::namespaced(c.clone(), &gone.0);
            self.may_write()?;
            match api.delete(&gone.1, &DeleteParams::default()).await {
                Ok(_) => changed = true,
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(refused(&format!("delete {}", gone.1))(e)),
            }
        }
        Ok(changed)
    }
}

impl Cluster for KubeCluster {
    fn read(&self) -> Result<(World, u64), ClusterError> {
        // The generation is taken before the lists, so a change during them moves it
        // past what is cached and the next read lists again.
        let generation = self.generation();
        if let Some((at, world)) = self.cache.lock().expect("cache lock").as_ref()
            && *at == generation
        {
            return Ok((world.clone(), generation));
        }
        let world = self.rt.block_on(self.read_all())?;
        *self.cache.lock().expect("cache lock") = Some((generation, world.clone()));
        Ok((world, generation))
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
        let done = self.rt.block_on(self.apply_object(&api, &endpoint));
        self.forget_read();
        done
    }

    fn delete_endpoint(&self, namespace: &str, name: &str) -> Result<(), ClusterError> {
        let api: Api<NetworkEndpoint> = Api::namespaced(self.client.clone(), namespace);
        let deleted = self.rt.block_on(api.delete(name, &DeleteParams::default()));
        self.forget_read();
        match deleted {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(refused(&format!("delete endpoint {namespace}/{name}"))(e)),
        }
    }

    fn apply(&self, desired: &Desired) -> Result<bool, ClusterError> {
        let done = self.rt.block_on(self.apply_desired(desired));
        self.forget_read();
        done
    }
}
