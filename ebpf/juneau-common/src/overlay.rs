//! Overlay state: this Node's VXLAN device and underlay NIC, and the other Nodes of
//! each segment.

/// Other Nodes per segment that a broadcast reaches.
pub const MAX_REMOTE_VTEPS: usize = 256;

/// Value of `jn_l2_remote[segment]`: the other Nodes that host endpoints of the
/// segment (IPv4, host order). Copies to them are sent after every local copy: once a
/// tunnel key is set, the frame must not be redirected to a veth.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteList {
    pub count: u32,
    pub pad: u32,
    pub vteps: [u32; MAX_REMOTE_VTEPS],
}

impl Default for RemoteList {
    fn default() -> Self {
        Self {
            count: 0,
            pad: 0,
            vteps: [0; MAX_REMOTE_VTEPS],
        }
    }
}

/// Value of `jn_node[0]`: this Node's overlay.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeConfig {
    /// The Node's VXLAN device (external mode); 0 while the overlay is not attached.
    pub vxlan_ifindex: u32,
    /// This Node's VTEP address (host order).
    pub local_vtep: u32,
    /// The underlay NIC the VXLAN device sends by (the uplink ElasticIPs are reached
    /// through). When set, known unicast IPv4 frames between Nodes are encapsulated and
    /// decapsulated by the datapath itself (no trip through the VXLAN device and the
    /// Node's UDP stack) unless [`NODE_DEVICE_ONLY`]; 0 leaves every frame to the
    /// device.
    pub underlay_ifindex: u32,
    /// `NODE_*` bits.
    pub flags: u32,
}

/// Every frame between Nodes by the VXLAN device (`juneau node --no-datapath-encap`):
/// the datapath neither encapsulates nor decapsulates, while the uplink's program
/// still serves ElasticIPs (ARP, delivery from outside).
pub const NODE_DEVICE_ONLY: u32 = 1 << 0;

impl NodeConfig {
    /// The datapath encapsulates and decapsulates known unicast itself.
    pub const fn own_encap(&self) -> bool {
        self.underlay_ifindex != 0 && self.flags & NODE_DEVICE_ONLY == 0
    }
}

/// UDP port of the overlay (IANA VXLAN).
pub const VXLAN_PORT: u16 = 4789;
/// Outer Ethernet + IPv4 + UDP + VXLAN headers.
pub const VXLAN_OVERHEAD: u32 = 50;

// The layouts are part of the kernel ABI of our maps: no implicit padding allowed.
const _: () = assert!(core::mem::size_of::<RemoteList>() == 8 + 4 * MAX_REMOTE_VTEPS);
const _: () = assert!(core::mem::size_of::<NodeConfig>() == 16);
