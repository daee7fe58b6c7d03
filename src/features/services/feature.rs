//! ClusterIP Services on this Node: every frontend of the cluster with the backends
//! that take new connections (`jn_svc`, `jn_svc_backend`, `jn_svc_maglev`), desired by
//! `node::services::desired` (pure) and written by the `ServiceWriter`
//! (`dataplane/svc.rs`), which owns those maps. Which Pods reach them is the router's
//! part (a segment of a consuming Vpc, `SEG_SERVICES`).
//!
//! Backends outside every segment (SVC-02) are reached through the Node's stack: once
//! the controller has given this Node a Service source address, the feature makes the
//! Service device (`netlink::svc_device`), attaches `svc_host` to its peer, routes this
//! Node's address to it and every other Node's to that Node's VTEP, and writes
//! `jn_svc_host`.
use std::{collections::BTreeSet, net::Ipv4Addr, sync::Mutex};

use juneau_common::{FdbKey, svc::SvcHost};

use crate::node::feature::{FeatureError, LoggedOnce, NodeFeature, NodeView};
use crate::{
    cluster::World,
    features::services::node as services,
    node::{
        dataplane::ServiceWriter,
        netlink::svc_device::{self, SERVICE_PEER, ServiceDevice},
    },
};

pub struct Services {
    writer: Mutex<ServiceWriter>,
    /// The Service device, once made, and the source addresses routed.
    host: Mutex<HostPath>,
    /// Endpoints and Services left out, each logged once.
    skipped: LoggedOnce,
}

#[derive(Default)]
struct HostPath {
    device: Option<ServiceDevice>,
    routed: BTreeSet<Ipv4Addr>,
    written: Option<(services::Sources, u32)>,
}

impl Services {
    pub fn new(writer: ServiceWriter) -> Self {
        Self {
            writer: Mutex::new(writer),
            host: Mutex::new(HostPath::default()),
            skipped: LoggedOnce::default(),
        }
    }

    /// The way through the Node's stack, as the cluster's source addresses want it;
    /// how many things changed.
    fn sync_host(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        let (own, others) = services::sources(world, node.name);
        let provider_vni = services::provider_vni(world);
        let mut host = self.host.lock().expect("service host lock");
        if host.written.as_ref() == Some(&((own, others.clone()), provider_vni)) {
            return Ok(0);
        }
        if own.is_none() && host.device.is_none() {
            return Ok(0);
        }
        let dev = match host.device {
            Some(d) => d,
            None => {
                let d = svc_device::ensure().map_err(|e| FeatureError::Host {
                    what: "the Service device",
                    cause: e.to_string(),
                })?;
                node.dataplane
                    .lock()
                    .expect("dataplane lock")
                    .attach_service_peer(SERVICE_PEER, d.peer_ifindex)
                    .map_err(FeatureError::write("the Service device's program"))?;
                host.device = Some(d);
                d
            }
        };
        let wanted: BTreeSet<Ipv4Addr> = own
            .iter()
            .copied()
            .chain(others.iter().map(|o| o.0))
            .collect();
        let gone: Vec<Ipv4Addr> = host.routed.difference(&wanted).copied().collect();
        svc_device::set_routes(&dev, own, &others, &gone).map_err(|e| FeatureError::Host {
            what: "the Service source routes",
            cause: e.to_string(),
        })?;
        host.routed = wanted;
        self.writer
            .lock()
            .expect("services lock")
            .set_host(SvcHost {
                ifindex: dev.ifindex,
                snat_ip: own.map_or(0, |ip| u32::from_ne_bytes(ip.octets())),
                mac: FdbKey::new(dev.mac),
                provider_vni,
                pad: 0,
            })
            .map_err(FeatureError::write("the Service device config"))?;
        tracing::info!(source = ?own, others = others.len(), "Service source addresses routed");
        host.written = Some(((own, others), provider_vni));
        Ok(1)
    }
}

impl NodeFeature for Services {
    fn name(&self) -> &'static str {
        "services"
    }

    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        // The way through the stack before the backends that need it.
        let host = self.sync_host(world, node);
        if let Err(e) = &host {
            tracing::error!(error = %e, "the Node's way to host backends is not synced; syncing the Services");
        }
        let (want, skipped) = services::desired(world, node.name);
        for line in skipped {
            self.skipped.warn(line, "left out of the Services");
        }
        let done = self
            .writer
            .lock()
            .expect("services lock")
            .sync(&want)
            .map_err(FeatureError::write("the Services maps"))?;
        let changed = done.frontends + done.backends + done.tables;
        if changed > 0 {
            tracing::info!(
                frontends = done.frontends,
                backends = done.backends,
                tables = done.tables,
                "services synced"
            );
        }
        Ok(changed + host?)
    }
}
