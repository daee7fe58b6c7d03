//! The read model before issue 24, as the baseline: after any watch event, and after
//! any own write, the next read listed every kind again (Pods and NetworkInterfaces by
//! the daemon's field selector). Emulated in front of the caches: the same LISTs, from
//! the same kind of client, before the read returns.
use std::{
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use juneau::{
    api::{
        ARPAdvertisement, AddressPool, ElasticIP, ElasticIPAttachment, ExternalNetwork, L2Network,
        NetworkACL, NetworkEndpoint, NetworkInterface, RouteTable, SecurityGroup, Subnet,
        TransitGateway, Vpc, VpcPeering,
    },
    cluster::{Cluster, ClusterError, Desired, World},
    store::k8s::KubeCluster,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, api::ListParams};

pub struct Relisting {
    inner: KubeCluster,
    client: Client,
    rt: tokio::runtime::Runtime,
    fields: Option<String>,
    /// The generation the last lists were made at.
    listed: Mutex<Option<u64>>,
    wrote: AtomicBool,
}

async fn list<K>(c: &Client, fields: Option<&str>) -> Result<usize, ClusterError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut lp = ListParams::default();
    if let Some(f) = fields {
        lp = lp.fields(f);
    }
    Api::<K>::all(c.clone())
        .list(&lp)
        .await
        .map(|l| l.items.len())
        .map_err(|e| ClusterError::Refused(e.to_string()))
}

impl Relisting {
    pub fn new(inner: KubeCluster, kubeconfig: &Path, node: Option<&str>) -> Relisting {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let agent = match node {
            Some(n) => format!("juneau-node/{n}"),
            None => "juneau-controller".into(),
        };
        let client = rt.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
            let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap();
            config
                .headers
                .push((http::header::USER_AGENT, agent.parse().unwrap()));
            Client::try_from(config).unwrap()
        });
        Relisting {
            inner,
            client,
            rt,
            fields: node.map(|n| format!("spec.nodeName={n}")),
            listed: Mutex::new(None),
            wrote: AtomicBool::new(false),
        }
    }

    fn relist(&self) -> Result<(), ClusterError> {
        let c = &self.client;
        let f = self.fields.as_deref();
        self.rt.block_on(async {
            list::<Pod>(c, f).await?;
            list::<Vpc>(c, None).await?;
            list::<VpcPeering>(c, None).await?;
            list::<TransitGateway>(c, None).await?;
            list::<Subnet>(c, None).await?;
            list::<L2Network>(c, None).await?;
            list::<RouteTable>(c, None).await?;
            list::<NetworkACL>(c, None).await?;
            list::<SecurityGroup>(c, None).await?;
            list::<NetworkInterface>(c, f).await?;
            list::<ExternalNetwork>(c, None).await?;
            list::<AddressPool>(c, None).await?;
            list::<ElasticIP>(c, None).await?;
            list::<ElasticIPAttachment>(c, None).await?;
            list::<ARPAdvertisement>(c, None).await?;
            list::<NetworkEndpoint>(c, None).await?;
            Ok(())
        })
    }
}

impl Cluster for Relisting {
    fn read(&self) -> Result<(World, u64), ClusterError> {
        let now = self.inner.wait(0, Duration::ZERO)?;
        let mut listed = self.listed.lock().unwrap();
        if *listed != Some(now) || self.wrote.swap(false, Ordering::Relaxed) {
            self.relist()?;
            *listed = Some(now);
        }
        drop(listed);
        self.inner.read()
    }

    fn wait(&self, seen: u64, timeout: Duration) -> Result<u64, ClusterError> {
        self.inner.wait(seen, timeout)
    }

    fn put_endpoint(&self, endpoint: NetworkEndpoint) -> Result<(), ClusterError> {
        self.wrote.store(true, Ordering::Relaxed);
        self.inner.put_endpoint(endpoint)
    }

    fn delete_endpoint(&self, namespace: &str, name: &str) -> Result<(), ClusterError> {
        self.wrote.store(true, Ordering::Relaxed);
        self.inner.delete_endpoint(namespace, name)
    }

    fn apply(&self, desired: &Desired) -> Result<bool, ClusterError> {
        // apply_desired listed every kind first, then wrote.
        self.relist()?;
        self.wrote.store(true, Ordering::Relaxed);
        self.inner.apply(desired)
    }

    fn set_attachment_condition(
        &self,
        name: &str,
        condition: juneau::api::condition::Condition,
    ) -> Result<bool, ClusterError> {
        self.wrote.store(true, Ordering::Relaxed);
        self.inner.set_attachment_condition(name, condition)
    }

    fn set_bgp_node_state(
        &self,
        node: &str,
        status: juneau::api::bgpnodestate::BGPNodeStateStatus,
    ) -> Result<bool, ClusterError> {
        self.wrote.store(true, Ordering::Relaxed);
        self.inner.set_bgp_node_state(node, status)
    }
}
