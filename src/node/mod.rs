//! The node daemon: owns the eBPF datapath of one Node and the interfaces it plumbs.
pub mod agent;
pub mod dataplane;
pub mod l2network;
pub mod netlink;
pub mod server;
pub mod veth;
pub mod vxlan;

pub use dataplane::{Dataplane, DataplaneError};
