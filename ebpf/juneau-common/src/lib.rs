//! Map key and value types shared by Juneau's eBPF programs and its userspace.
//!
//! Every type here is `#[repr(C)]` with explicit padding so that the byte layout the
//! kernel sees is the one both sides compile. Nothing else may define a map type: the
//! eBPF crate and the daemon both import them from here.
#![no_std]

pub mod ct;
pub mod drop;
pub mod eip;
pub mod gw;
pub mod l2;
pub mod overlay;
pub mod policy;
pub mod port;
pub mod svc;
pub mod tail;

pub use drop::DropReason;
pub use eip::{EipEntry, ExtArp};
pub use gw::{GwSegment, NbrEntry, NbrKey, RouteEntry};
pub use l2::{FdbEntry, FdbKey, FloodList, FloodPort};
pub use overlay::{NodeConfig, RemoteList};
pub use port::PortConfig;

/// Declares a counter enum whose discriminants index a per-CPU array: the enum, the
/// array's size (`SLOTS`), the list of every member (`ALL`, in slot order) and each
/// member's name (`name()`), from one list, so none of them is kept by hand. The
/// members must be numbered 0, 1, 2, ... and fit the slots (checked at compile time).
#[macro_export]
macro_rules! slots {
    (
        $(#[$meta:meta])*
        pub enum $enum:ident: $slots:literal {
            $( $(#[doc = $doc:expr])* $variant:ident = $value:literal => $name:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $enum {
            $( $(#[doc = $doc])* $variant = $value, )*
        }

        impl $enum {
            /// Slots of the counter array (more than the members: room to add some
            /// without changing the map's layout).
            pub const SLOTS: u32 = $slots;
            /// Every member, in slot order.
            pub const ALL: &'static [$enum] = &[$($enum::$variant,)*];

            /// The name shown by the CLI and the metrics, and used in test assertions.
            pub const fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $name,)*
                }
            }
        }

        const _: () = {
            let all = $enum::ALL;
            let mut i = 0;
            while i < all.len() {
                assert!(all[i] as usize == i, "members are numbered 0, 1, 2, ...");
                i += 1;
            }
            assert!(all.len() <= $slots as usize, "more members than slots");
        };
    };
}

/// Version of the pinned layout: the map names, key and value types and sizes above.
/// A daemon adopts only pins of its own version (under `v<LAYOUT_VERSION>/` of its pin
/// folder); any change to a map type, size or meaning must bump it, so that a new
/// daemon builds its maps afresh and migrates instead of reading an old map wrongly.
/// 16: `PORT_ACL` (a port whose segment has a NetworkACL, entered straight from the
/// uplink only without it): a port of an older layout lacks the bit it needs.
/// 17: `jn_ext_pools` (EIP-14): an older layout has no map to adopt for it.
pub const LAYOUT_VERSION: u32 = 17;

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
    pub const GW_SEG: &str = "jn_gw_seg";
    pub const GW_RT: &str = "jn_gw_rt";
    pub const GW_NBR: &str = "jn_gw_nbr";
    pub const GW_SNOOP: &str = "jn_gw_snoop";
    /// The one tail-call table (`tail::TAIL_*` slots).
    pub const PROGS: &str = "jn_progs";
    pub const GW_STATS: &str = "jn_gw_stats";
    pub const GW_ICMP: &str = "jn_gw_icmp";
    pub const GW_LISTEN: &str = "jn_gw_listen";
    pub const EIP_DIRECT: &str = "jn_eip_direct";
    pub const EXT_ARP: &str = "jn_ext_arp";
    /// The prefixes of announced bgp pools, delivered here or elsewhere (EIP-14).
    pub const EXT_POOLS: &str = "jn_ext_pools";
    /// The connection table (`ct`).
    pub const CT: &str = "jn_ct";
    /// Service frontends, backends, Maglev tables, affinities (`svc`).
    pub const SVC: &str = "jn_svc";
    pub const SVC_BACKEND: &str = "jn_svc_backend";
    pub const SVC_MAGLEV: &str = "jn_svc_maglev";
    pub const SVC_AFFINITY: &str = "jn_svc_affinity";
    /// How this Node reaches backends through its own stack (SVC-02).
    pub const SVC_HOST: &str = "jn_svc_host";
    /// NetworkACL and SecurityGroup rule sets (`policy`).
    pub const POL_SET: &str = "jn_pol_set";
    pub const POL_PEER: &str = "jn_pol_peer";
    pub const POL_PORT: &str = "jn_pol_port";
    /// A NIC's SecurityGroups by (VNI, address).
    pub const POL_NIC: &str = "jn_pol_nic";
    /// Bumped by the daemon at every rule change: connections are re-decided.
    pub const POL_EPOCH: &str = "jn_pol_epoch";
    pub const POL_STATS: &str = "jn_pol_stats";
    /// Bumped by the daemon at every route or segment change: a NATGateway
    /// connection's cached hop (`ct::NatHop`) is looked up again.
    pub const GW_EPOCH: &str = "jn_gw_epoch";
    /// A fragmented datagram's ports, for its later fragments (`ct::FragKey`).
    pub const FRAG: &str = "jn_frag";
    /// Every map the daemon pins, in the order `kubectl-juneau` lists them.
    pub const ALL: [&str; 32] = [
        NODE,
        L2_PORT,
        L2_VNI,
        L2_FDB,
        L2_FLOOD,
        L2_REMOTE,
        DROPS,
        PROGS,
        GW_SEG,
        GW_RT,
        GW_NBR,
        GW_SNOOP,
        GW_STATS,
        GW_ICMP,
        GW_LISTEN,
        EIP_DIRECT,
        EXT_ARP,
        EXT_POOLS,
        CT,
        SVC,
        SVC_BACKEND,
        SVC_MAGLEV,
        SVC_AFFINITY,
        SVC_HOST,
        POL_SET,
        POL_PEER,
        POL_PORT,
        POL_NIC,
        POL_EPOCH,
        POL_STATS,
        FRAG,
        GW_EPOCH,
    ];
}

/// Program names as they appear in the object file (and in `bpftool prog`).
/// Entry programs are named by the hook they run at.
pub mod prog_names {
    /// TCX ingress of a Pod NIC's host-side veth.
    pub const PORT_INGRESS: &str = "port_ingress";
    /// TCX ingress of the Node's VXLAN device.
    pub const OVERLAY_INGRESS: &str = "overlay_ingress";
    /// TCX ingress of the Node's underlay NIC.
    pub const UNDERLAY_INGRESS: &str = "underlay_ingress";
    /// The Vpc router, entered by a tail call from `port_ingress` (never attached;
    /// every tail-called program's slot is in `tail`).
    pub const GW_ROUTE: &str = "gw_route";
    /// A direct ElasticIP NIC's port, entered by a tail call from `port_ingress`.
    pub const EIP_PORT: &str = "eip_port";
    /// The router's second half (policy, route, hop), entered by a tail call from
    /// `gw_route`.
    pub const GW_FORWARD: &str = "gw_forward";
    /// ARP for and IPv4 to ElasticIPs on the uplink, entered by a tail call from
    /// `underlay_ingress`.
    pub const EIP_UPLINK: &str = "eip_uplink";
    /// Delivery into a port that consumes Services (a reply given its ClusterIP back),
    /// entered by a tail call from the delivery stage.
    pub const DELIVER_SVC: &str = "deliver_svc";
    /// Ingress of the peer of the Node's Service device: replies to this Node's Service
    /// source address, given back to their clients (SVC-02).
    pub const SVC_HOST: &str = "svc_host";
    /// A NATGateway's way out, entered by a tail call from `gw_forward`.
    pub const NAT_OUT: &str = "nat_out";
    pub const ALL: [&str; 10] = [
        PORT_INGRESS,
        OVERLAY_INGRESS,
        UNDERLAY_INGRESS,
        GW_ROUTE,
        EIP_PORT,
        EIP_UPLINK,
        DELIVER_SVC,
        SVC_HOST,
        GW_FORWARD,
        NAT_OUT,
    ];
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
    unsafe impl aya::Pod for crate::GwSegment {}
    unsafe impl aya::Pod for crate::RouteEntry {}
    unsafe impl aya::Pod for crate::NbrKey {}
    unsafe impl aya::Pod for crate::NbrEntry {}
    unsafe impl aya::Pod for crate::gw::IcmpBucket {}
    unsafe impl aya::Pod for crate::EipEntry {}
    unsafe impl aya::Pod for crate::ExtArp {}
    unsafe impl aya::Pod for crate::ct::CtKey {}
    unsafe impl aya::Pod for crate::ct::CtEntry {}
    unsafe impl aya::Pod for crate::ct::FragKey {}
    unsafe impl aya::Pod for crate::ct::FragPorts {}
    unsafe impl aya::Pod for crate::svc::SvcKey {}
    unsafe impl aya::Pod for crate::svc::SvcEntry {}
    unsafe impl aya::Pod for crate::svc::Backend {}
    unsafe impl aya::Pod for crate::svc::SvcHost {}
    unsafe impl aya::Pod for crate::svc::AffinityKey {}
    unsafe impl aya::Pod for crate::svc::Affinity {}
    unsafe impl aya::Pod for crate::policy::PolSet {}
    unsafe impl aya::Pod for crate::policy::PolCounters {}
    unsafe impl aya::Pod for crate::policy::PolNic {}
    unsafe impl aya::Pod for crate::policy::RuleBits {}
}
