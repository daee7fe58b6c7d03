//! After a start: the Node made to agree with the cluster (stale ports and endpoints
//! removed, Pod NICs attached again, missing endpoints restored).
use std::collections::BTreeSet;

use super::{Agent, cluster_err, nic_of, port_links};
use crate::{
    cni::CniError,
    node::{nic, veth},
};

impl Agent {
    /// After a start (a restart adopting a previous daemon's datapath, or a new layout
    /// version), makes the Node agree with the cluster: ports whose interface is gone
    /// are removed, Pod NICs the datapath does not serve are attached again, and this
    /// Node's NetworkEndpoints match its ports (Pods deleted while the daemon was down
    /// lose theirs). Returns what it changed, for the log.
    pub fn reconcile_ports(&self) -> Result<ReconcileReport, CniError> {
        let mut report = ReconcileReport {
            stale_ports: self.prune_stale_ports(),
            ..Default::default()
        };
        let links = port_links(&format!("{}:", veth::OWNER_ALIAS))?;
        let (world, _) = self.cluster.read().map_err(cluster_err)?;
        let mut dp = self.dataplane.lock().expect("dataplane lock");
        let served: BTreeSet<u32> = dp.ports().into_iter().collect();
        for (name, ifindex, alias) in &links {
            let Some(nic) = nic_of(&world, alias) else {
                continue;
            };
            let driver = match nic::driver_for(nic) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(nic = %alias.nic(), error = %e.msg, "not attached again");
                    continue;
                }
            };
            let Some(spec) = driver.port_spec(nic, &alias.container_id, *ifindex) else {
                tracing::warn!(nic = %alias.nic(), "not attached again: its NetworkInterface has no VNI or address yet");
                continue;
            };
            if served.contains(ifindex) {
                // A daemon killed between two writes of a port leaves it listed but
                // inactive, on another segment or not held to its address: write it
                // again. A port written whole that runs another program than its
                // kind's (a routed port on `port_ingress`, a TCX link an older daemon
                // left) gets its own from `attach_port`, the new one on before the old
                // one goes.
                let written = dp.port(*ifindex).is_ok_and(|p| spec.written_as(&p));
                if written && dp.port_runs(*ifindex, spec.kind.program()) {
                    continue;
                }
                if written && dp.port_attached(*ifindex) {
                    match dp.attach_port(name, spec) {
                        Ok(_) => report.reattached += 1,
                        Err(e) => {
                            tracing::warn!(nic = %alias.nic(), error = %e, "cannot switch a port to its program")
                        }
                    }
                    continue;
                }
                if let Err(e) = dp.remove_port(*ifindex) {
                    tracing::warn!(nic = %alias.nic(), error = %e, "cannot reset a half-written port");
                    continue;
                }
            }
            match dp.attach_port(name, spec) {
                Ok(_) => report.reattached += 1,
                Err(e) => tracing::warn!(nic = %alias.nic(), error = %e, "cannot attach again"),
            }
        }
        // What the datapath does not serve now runs no program of ours (a filter an
        // older daemon or layout left on a veth whose NIC is gone).
        let veths: Vec<(String, u32)> = links.iter().map(|(n, i, _)| (n.clone(), *i)).collect();
        report.stale_filters = dp.detach_unserved_filters(&veths);
        drop(dp);
        let mine: BTreeSet<(String, String)> = links
            .iter()
            .map(|(_, _, a)| (a.namespace.clone(), format!("{}.{}", a.pod, a.interface)))
            .collect();
        for ep in world
            .endpoints
            .iter()
            .filter(|e| e.spec.node_name == self.node)
        {
            let key = (
                ep.metadata.namespace.clone().unwrap_or_default(),
                ep.metadata.name.clone().unwrap_or_default(),
            );
            if !mine.contains(&key) {
                self.cluster
                    .delete_endpoint(&key.0, &key.1)
                    .map_err(cluster_err)?;
                report.stale_endpoints += 1;
            }
        }
        let have: BTreeSet<(String, String)> = world
            .endpoints
            .iter()
            .filter(|e| e.spec.node_name == self.node)
            .map(|e| {
                (
                    e.metadata.namespace.clone().unwrap_or_default(),
                    e.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect();
        for (_, _, alias) in &links {
            let key = (
                alias.namespace.clone(),
                format!("{}.{}", alias.pod, alias.interface),
            );
            if have.contains(&key) {
                continue;
            }
            let nic = nic_of(&world, alias);
            if let Some(nic) = nic {
                let ep = self.endpoint_for(&alias.namespace, &alias.pod, &alias.container_id, nic);
                self.cluster.put_endpoint(ep).map_err(cluster_err)?;
                report.restored_endpoints += 1;
            }
        }
        Ok(report)
    }
}

/// What [`Agent::reconcile_ports`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub stale_ports: usize,
    pub reattached: usize,
    pub stale_endpoints: usize,
    /// Port filters detached from veths this datapath does not serve.
    pub stale_filters: usize,
    pub restored_endpoints: usize,
}
