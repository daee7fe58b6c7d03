//! Map key and value types shared by Juneau's eBPF programs and its userspace.
//!
//! Every type here is `#[repr(C)]` with explicit padding so that the byte layout the
//! kernel sees is the one both sides compile. Nothing else may define a map type: the
//! eBPF crate and the daemon both import them from here.
#![no_std]

pub mod drop;
pub mod l2;

pub use drop::DropReason;
pub use l2::{FdbEntry, FdbKey, FloodList, FloodPort, NodeConfig, PortConfig, RemoteList};

/// The names under which the maps are created and pinned. One prefix (`jn_`) so that a
/// `bpftool map list` tells Juneau's maps apart from any other tenant of the machine.
pub mod map_names {
    pub const L2_PORT: &str = "jn_l2_port";
    pub const L2_FDB: &str = "jn_l2_fdb";
    pub const L2_FLOOD: &str = "jn_l2_flood";
    pub const L2_REMOTE: &str = "jn_l2_remote";
    pub const L2_VNI: &str = "jn_l2_vni";
    pub const NODE: &str = "jn_node";
    pub const DROPS: &str = "jn_drops";
    /// Every map the daemon pins, in the order `kubectl-juneau` lists them.
    pub const ALL: [&str; 7] = [NODE, L2_PORT, L2_VNI, L2_FDB, L2_FLOOD, L2_REMOTE, DROPS];
}

/// Program names as they appear in the object file (and in `bpftool prog`).
pub mod prog_names {
    pub const L2_PORT_INGRESS: &str = "l2_port_ingress";
    pub const L2_VXLAN_INGRESS: &str = "l2_vxlan_ingress";
    pub const L2_UNDERLAY_INGRESS: &str = "l2_underlay_ingress";
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: all of these are #[repr(C)], Copy, contain only integers and byte arrays,
    // and have no implicit padding (checked by the size assertions in their modules).
    unsafe impl aya::Pod for crate::PortConfig {}
    unsafe impl aya::Pod for crate::FdbKey {}
    unsafe impl aya::Pod for crate::FdbEntry {}
    unsafe impl aya::Pod for crate::FloodList {}
    unsafe impl aya::Pod for crate::FloodPort {}
    unsafe impl aya::Pod for crate::RemoteList {}
    unsafe impl aya::Pod for crate::NodeConfig {}
}
