//! The Vpc router: the gateway of every L2Network with `gateway`, present on every Node
//! with the same address and MAC (anycast), entered from a port by a tail call.
//!
//! Keys are by VNI, not by local segment slot: a Node routes *to* a segment it has no
//! port of (its packets leave by the overlay), so the router's view of a segment cannot
//! depend on a local slot.

/// Gateway segments every Node knows (`jn_gw_seg`).
pub const MAX_GW_SEGMENTS: u32 = 4096;
/// RouteTables every Node holds (`jn_gw_rt`, one LPM trie each, by a local slot).
pub const MAX_ROUTE_TABLES: u32 = 1024;
/// Routes per RouteTable.
pub const ROUTES_PER_TABLE: u32 = 1024;
/// Neighbours (address -> MAC and Node) of every gateway segment together. Seeded by
/// the daemon from the NetworkEndpoints Juneau wrote; never evicted by traffic.
pub const MAX_NEIGHBOURS: u32 = 65536;

/// Value of `jn_gw_seg[vni]`: a gateway segment.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GwSegment {
    /// The gateway's IPv4 address, network order (as it sits in packets).
    pub gw_ip: u32,
    /// Local slot of the segment's RouteTable in `jn_gw_rt`.
    pub table: u32,
    /// The segment's MTU.
    pub mtu: u32,
    /// The length of the segment's prefix (its CIDR is `gw_ip` / `prefix_len`): the
    /// router learns only addresses inside it.
    pub prefix_len: u32,
    /// The gateway's MAC (`status.gatewayMAC`), padded as a learning-table key.
    pub gw_mac: crate::FdbKey,
    /// `SEG_*`.
    pub flags: u32,
    /// The rule set of the segment's NetworkACL (`policy`), 0 for none: it acts on
    /// what crosses the gateway (L2-20).
    pub acl: u32,
}

impl GwSegment {
    /// Whether `addr` (network order) is inside the segment's prefix.
    #[inline(always)]
    pub const fn contains(&self, addr: u32) -> bool {
        if self.prefix_len == 0 || self.prefix_len > 32 {
            return true;
        }
        let mask = (u32::MAX << (32 - self.prefix_len)).to_be();
        (addr ^ self.gw_ip) & mask == 0
    }
}

/// The segment's Vpc consumes the cluster's Services (`spec.service.consume`): its
/// Pods' packets to a ClusterIP are translated (SVC-01); without it a ClusterIP is
/// routed as any other address (to no route).
pub const SEG_SERVICES: u32 = 1;

/// The segment is in the Vpc whose Pods back the Services (the provider: the default
/// Vpc). A client elsewhere reaches them with its source translated (SVC-02).
pub const SEG_PROVIDER: u32 = 2;

/// Key of a RouteTable's LPM trie: the destination prefix, network order (the LPM key's
/// data is matched bytewise from its first byte).
pub type RouteAddr = [u8; 4];

/// A route to a connected segment: deliver to the neighbour that holds the address.
pub const ROUTE_CONNECTED: u32 = 1;
/// A route of a kind this datapath does not build yet (peering, transit, VPN): dropped under `ROUTE_UNSUPPORTED`, never sent elsewhere.
pub const ROUTE_UNSUPPORTED: u32 = 2;
/// A route via an endpoint (a router Pod or VM on a segment of the Vpc): sent to the
/// neighbour that holds `RouteEntry::nh_ip` in segment `vni`, one hop.
pub const ROUTE_ENDPOINT: u32 = 3;
/// A route via an endpoint that does not exist (yet), or not in this Vpc: dropped under
/// `NO_NEXT_HOP`, never sent by a shorter route instead.
pub const ROUTE_NO_NEXT_HOP: u32 = 4;
/// A route via a NATGateway (NAT-01): the packet leaves this Node by its own routing
/// table with its source translated to `RouteEntry::nh_ip`, this Node's address on the
/// NATGateway's ExternalNetwork. An address of 0 (no attachment here yet) is dropped
/// under `NAT_NO_ADDRESS`, never routed by a shorter route.
pub const ROUTE_NAT_GW: u32 = 5;
/// One of the cluster's own ranges (Service CIDRs, Node addresses, the default Vpc's
/// Pod network) in a table that routes to a NATGateway: never translated out, answered
/// as no route (ICMP net unreachable, counted as `NO_ROUTE`) as if the table had none.
pub const ROUTE_UNREACHABLE: u32 = 6;
/// The cluster's Service CIDRs in a table of a Vpc that does not consume Services
/// (SVC-01): refused at once (a TCP reset, else ICMP administratively prohibited),
/// counted as `SVC_NOT_CONSUMED`, never routed elsewhere.
pub const ROUTE_NO_SERVICES: u32 = 7;
/// A route via the Vpc's internet gateway (NAT-03). A NIC with an ElasticIP attached
/// leaves with it as its source (1:1, `nat/one.rs`); any other NIC leaves through the
/// Vpc's NATGateway as `ROUTE_NAT_GW` does, `RouteEntry::nh_ip` being this Node's
/// address on that gateway's ExternalNetwork. With no NATGateway address here (0) it
/// is refused at once and counted as `IGW_NO_PUBLIC_ADDRESS`, never routed by a
/// shorter route.
pub const ROUTE_INTERNET_GW: u32 = 8;

/// Value of a RouteTable's trie.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteEntry {
    /// `ROUTE_*`.
    pub kind: u32,
    /// The destination segment's VNI.
    pub vni: u32,
    /// The destination segment's gateway address (network order): pings to it are
    /// answered by the router.
    pub gw_ip: u32,
    /// The destination segment's MTU.
    pub mtu: u32,
    /// The destination segment's gateway MAC: the source of routed frames there.
    /// Plain bytes: an LPM value's alignment may not exceed the key's 4 bytes of data.
    pub gw_mac: [u8; 6],
    pub pad: [u8; 2],
    /// With `ROUTE_ENDPOINT`: the next hop's address (network order); with
    /// `ROUTE_NAT_GW` and `ROUTE_INTERNET_GW`: the address a NATGateway translates the
    /// source to (0: none on this Node); else 0.
    pub nh_ip: u32,
}

/// Key of `jn_gw_nbr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NbrKey {
    pub vni: u32,
    /// Network order.
    pub ip: u32,
}

/// The neighbour was written by the daemon from a NetworkEndpoint.
pub const NBR_SEEDED: u32 = 1 << 0;
/// The neighbour was learned by the datapath from an ARP packet (`jn_gw_snoop`).
pub const NBR_SNOOPED: u32 = 1 << 1;
/// Neighbours learned from ARP: hosts Juneau did not address (a self-assigned host, a
/// VM behind a bridge in a Pod). An LRU of its own, so a tenant flooding ARP evicts
/// only learned bindings, never the seeded ones of anyone.
pub const MAX_SNOOPED: u32 = 65536;

/// Value of `jn_gw_nbr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NbrEntry {
    pub mac: crate::FdbKey,
    /// The VTEP of the Node the address lives on (host order, as tunnel keys carry it).
    pub vtep: u32,
    /// `NBR_*`.
    pub flags: u32,
}

/// Per-CPU token bucket of the ICMP errors the router sends (RFC 1812 4.3.2.8).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IcmpBucket {
    pub tokens: u64,
    pub last_ns: u64,
}

/// ICMP errors each CPU may send per second, and the burst it may save up.
pub const ICMP_ERRORS_PER_SEC: u64 = 1000;

crate::slots! {
    /// Slots of `jn_gw_stats` (per-CPU counters of what the router did).
    pub enum GwStat: 8 {
        /// Packets routed to another segment.
        Routed = 0 => "ROUTED",
        /// ARP requests for a gateway answered.
        ArpReplies = 1 => "ARP_REPLIES",
        /// Echo requests to a gateway answered.
        EchoReplies = 2 => "ECHO_REPLIES",
        /// ICMP errors sent (time exceeded, fragmentation needed).
        IcmpErrors = 3 => "ICMP_ERRORS",
        /// ICMP errors not sent: the bucket was empty.
        IcmpSuppressed = 4 => "ICMP_SUPPRESSED",
        /// Neighbours learned (or moved) from ARP.
        Snooped = 5 => "SNOOPED",
        /// Packets of established NATGateway connections sent from the router's first
        /// program (`nat/fast.rs`), not through `gw_forward` and `nat_out`.
        NatFast = 6 => "NAT_FAST",
    }
}

const _: () = assert!(core::mem::size_of::<GwSegment>() == 32);
const _: () = assert!(core::mem::size_of::<RouteEntry>() == 28);
const _: () = assert!(core::mem::size_of::<NbrKey>() == 8);
const _: () = assert!(core::mem::size_of::<NbrEntry>() == 16);
const _: () = assert!(core::mem::size_of::<IcmpBucket>() == 16);
