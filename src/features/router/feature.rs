//! The Vpc router on this Node: gateway segments, RouteTables, neighbours and the
//! listener lists, desired by `node::gateway` (pure) and written by its
//! `RouterWriter` (`dataplane/gw.rs`), the ports' gateway bits by the port owner.
use std::sync::Mutex;

use crate::node::feature::{FeatureError, LoggedOnce, NodeFeature, NodeView};
use crate::{cluster::World, features::router::gateway, node::dataplane::RouterWriter};

pub struct Router {
    /// The router's maps (their own lock: a CNI ADD never waits for a route table).
    writer: Mutex<RouterWriter>,
    /// Objects the router left out, each logged once.
    skipped: LoggedOnce,
}

impl Router {
    pub fn new(writer: RouterWriter) -> Self {
        Self {
            writer: Mutex::new(writer),
            skipped: LoggedOnce::default(),
        }
    }
}

impl NodeFeature for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        // Listeners first: the router's sync rewrites their lists with what it knows. A
        // failure here is logged and does not keep the router's own maps from syncing.
        let nodes = gateway::listen_nodes(world, node.name);
        let listened = node
            .dataplane
            .lock()
            .expect("dataplane lock")
            .set_listen_nodes(nodes)
            .map_err(FeatureError::write("the listener lists"));
        if let Err(e) = &listened {
            tracing::error!(error = %e, "listener lists not synced; syncing the router");
        }
        let (want, skipped) = gateway::desired(world, node.name);
        for line in skipped {
            self.skipped.warn(line, "left out of the router");
        }
        let done = self
            .writer
            .lock()
            .expect("router lock")
            .sync(&want, |gateways| {
                node.dataplane
                    .lock()
                    .expect("dataplane lock")
                    .set_gateways(gateways)
            })
            .map_err(FeatureError::write("the router maps"))?;
        if !done.is_empty() {
            tracing::info!(
                tables = done.tables,
                segments = done.segments,
                neighbours = done.neighbours,
                ports = done.ports,
                "router synced"
            );
        }
        Ok(listened? + done.tables + done.segments + done.neighbours + done.ports)
    }
}
