//! The node daemon: owns the eBPF datapath of one Node and the interfaces it plumbs.
//! `daemon` is the program (`juneau node`) and the one Node bring-up, `settings` its
//! flags and config file; `agent` serves
//! the CNI plugin; `nic` holds one driver per NIC kind; `dataplane` loads, pins and
//! writes the maps; `server`, `metrics` and `metrics_http` are its edges.
pub mod agent;
mod coalesce;
pub mod daemon;
pub mod dataplane;
pub mod egress;
pub mod feature;
pub mod features;
pub mod l2network;
pub mod metrics;
pub mod metrics_http;
pub mod netlink;
pub mod nic;
pub mod probe;
pub mod server;
pub mod settings;
mod sweeps;
pub mod veth;
pub mod vxlan;
mod workers;

pub use dataplane::{Dataplane, DataplaneError};
