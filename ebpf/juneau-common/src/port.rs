//! A port: the host side of one NIC (a Pod's veth) as the datapath sees it, in
//! `jn_l2_port[ifindex]`. Every `PORT_*` bit is defined here and nowhere else: the
//! hooks, the delivery stage and the daemon's NIC drivers all read one set.
use crate::FdbKey;

/// A port is configured and forwards.
pub const PORT_ACTIVE: u32 = 1 << 0;
/// The port is the host side of a veth whose peer lives in another network namespace:
/// deliver to it with `bpf_redirect_peer`, which enters the peer's ingress directly and
/// skips a veth transmit and a backlog hop. Ports without it get `bpf_redirect`.
pub const PORT_PEER: u32 = 1 << 1;
/// The port's segment has a gateway: frames to `PortConfig::gw_mac` are routed and
/// ARP for the gateway address is answered on this Node (L2-13).
pub const PORT_GATEWAY: u32 = 1 << 2;
/// The port is a Subnet NIC: everything it sends is IPv4 or ARP from its own MAC and
/// address (`PortConfig::own_mac`, `own_ip`), and all of it goes to the router, which
/// answers ARP for the gateway and for every neighbour it knows (nothing is flooded)
/// and routes by address, within the Subnet too. Always set with [`PORT_GATEWAY`].
pub const PORT_ROUTED: u32 = 1 << 3;
/// A port whose NIC holds an ElasticIP (with `PORT_ROUTED`: its MAC is pinned and it is
/// never flooded). Its `PortConfig` has the EIP as `own_ip`, the Pod's MAC as
/// `own_mac`, the ExternalNetwork's networkID as `vni`, and the gateway MAC every
/// direct NIC of that network sees for 169.254.0.1 as `gw_mac`.
pub const PORT_EIP: u32 = 1 << 4;
/// The port's NIC carries SecurityGroups (POL-02): their rule sets are in
/// `jn_pol_nic[(vni, the NIC's address)]`, and a packet from or to the port without
/// that entry is denied (a NIC attached before the daemon wrote its groups, or a source
/// address that is not the NIC's), never let through.
pub const PORT_SG: u32 = 1 << 5;
/// With [`PORT_GATEWAY`]: the port's segment has a NetworkACL (`GwSegment::acl`),
/// which judges what crosses its gateway. A packet the datapath brings in from outside
/// (an attached ElasticIP's, NAT-03) to a port with neither this nor [`PORT_SG`] has
/// no policy to meet and is delivered straight, without reading the segment. Written
/// with the gateway bit by the router's sync.
pub const PORT_ACL: u32 = 1 << 6;

/// Value of `jn_l2_port[ifindex]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortConfig {
    /// The segment's VXLAN network identifier.
    pub vni: u32,
    /// The segment's local slot: index of its table in `jn_l2_fdb` and `jn_l2_flood`.
    pub segment: u32,
    /// `PORT_*` bits.
    pub flags: u32,
    /// Segment MTU (L2-21); 0 = no check.
    pub mtu: u32,
    /// One-entry learning cache, written by the datapath only: the last source MAC
    /// learned on this port and when (jiffies). A frame from the same MAC within
    /// [`crate::l2::LEARN_CACHE_JIFFIES`] skips the table lookup entirely; 0 = empty.
    pub cache_mac: FdbKey,
    pub cache_jiffies: u64,
    /// The segment's gateway MAC when the port has `PORT_GATEWAY` (L2-13), else zero.
    /// Kept in the port so that a pure-L2 frame on a gateway segment pays one compare,
    /// not a lookup.
    pub gw_mac: FdbKey,
    /// With `PORT_ROUTED`: the NIC's MAC and IPv4 address (network order), the only
    /// sources it may send from; zero otherwise.
    pub own_mac: FdbKey,
    pub own_ip: u32,
    /// With `PORT_ROUTED`: the ElasticIP attached to the NIC (network order), which a
    /// route via the internet gateway gives its packets as their source (1:1 NAT,
    /// NAT-03); 0 for none (the Vpc's NATGateway then, if any). Zero in what was
    /// padding: no layout change.
    pub public_ip: u32,
}

// Part of the kernel ABI of `jn_l2_port`: no implicit padding allowed.
const _: () = assert!(core::mem::size_of::<PortConfig>() == 56);
