//! `kubectl-juneau`: what a Node's datapath holds and where it is attached, read from
//! the kernel (pinned maps, TCX queries in the Node's network namespace), never from
//! the daemon's own records (MX-03).
pub mod attachments;
pub mod describe;
#[cfg(test)]
mod describe_tests;
pub mod dump;
pub mod filter;
pub mod hop;
pub mod maps;
pub mod output;
pub mod source;
pub mod trace;
pub mod views;

use std::path::{Path, PathBuf};

pub use crate::features::elasticip::cli::{
    ArpAnswerRow, EipPortRow, ElasticIpRow, HostMacRow, arp_answer_table, dump_arp_answers,
    dump_eip_ports, dump_elastic_ips, eip_port_table, elastic_ip_table, host_mac_table, host_macs,
};
pub use crate::features::router::cli::{
    GwSegmentRow, NeighbourRow, RouteRow, dump_gw_neighbours, dump_gw_routes, dump_gw_segments,
    dump_gw_stats,
};
pub use crate::features::services::cli::{
    BackendRow, ConnectionRow, ServiceRow, backend_table, connection_table, dump_backends,
    dump_conntrack, dump_services, service_table,
};
pub use attachments::{AttachmentRow, attachments, port_names};
use aya::maps::MapData;
pub use filter::{DUMPABLE_MAPS, Filter, dumpable, filter_keys};
pub use maps::{FdbRow, dump_drops, dump_fdb, parse_inner_key};
pub use source::read_world;
pub use views::{
    ArpTableRow, FdbViewRow, PoolRow, arp_table, dump_address_pools, dump_arp_table, dump_fdb_view,
    fdb_table, pool_table,
};

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(
        "cannot open {path}: {source}; is the Node's daemon running (standalone: without --once)?"
    )]
    Open {
        path: PathBuf,
        source: aya::maps::MapError,
    },
    #[error("map {0}: {1}")]
    Map(&'static str, aya::maps::MapError),
    #[error("this Node has no segment with VNI {0}")]
    NoSuchVni(u32),
    #[error(
        "cannot find the network namespace of node {node}: {why}; is its daemon running? (or pass --netns)"
    )]
    NoNetns { node: String, why: String },
    #[error("cannot query {what}: {why}")]
    Query { what: String, why: String },
    #[error("{0}")]
    Usage(String),
}

/// The folder of a Node's pinned maps (this build's layout version).
pub fn node_dir(node: &str) -> PathBuf {
    use crate::node::dataplane::pins;
    pins::PinLayout::new(&pins::pin_dir_of(node)).maps_dir()
}

/// The network namespace a Node's daemon runs in, from its pid file.
pub fn node_netns(node: &str) -> Result<PathBuf, CliError> {
    let pid_file = crate::node::daemon::pid_file_of(&crate::node::daemon::socket_of(node));
    let fail = |why: String| CliError::NoNetns {
        node: node.to_owned(),
        why,
    };
    let pid = std::fs::read_to_string(&pid_file)
        .map_err(|e| fail(format!("{}: {e}", pid_file.display())))?;
    let ns = PathBuf::from(format!("/proc/{}/ns/net", pid.trim()));
    if ns.exists() {
        Ok(ns)
    } else {
        Err(fail(format!("process {} is gone", pid.trim())))
    }
}

pub(crate) fn open(dir: &Path, name: &'static str) -> Result<MapData, CliError> {
    let path = dir.join(name);
    MapData::from_pin(&path).map_err(|source| CliError::Open { path, source })
}
