//! The node daemon: owns the eBPF datapath of one Node and the interfaces it plumbs.
pub mod dataplane;
pub mod l2network;
pub mod veth;

pub use dataplane::{Dataplane, DataplaneError};
