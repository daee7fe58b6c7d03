//! ElasticIPs held directly by Pod NICs (seed 003): the NIC's port, every direct
//! ElasticIP of the cluster, and the addresses this Node answers ARP for.
use crate::FdbKey;

/// 169.254.0.1 as it sits in packets: the direct NIC's gateway, no host (EIP-08).
pub const NIC_GATEWAY: u32 = u32::from_ne_bytes([169, 254, 0, 1]);

/// Direct ElasticIPs a Node knows (every one of the cluster, on every Node). The
/// reference holds 512 per LPM; thousands are the goal here.
pub const MAX_EIPS: u32 = 16384;
/// Addresses one Node may answer ARP for.
pub const MAX_EXT_ARP: u32 = 4096;

/// Prefixes of bgp AddressPools a Node knows how they are delivered (EIP-14): every
/// BGPAdvertisement's prefixes, announced here or pinned to another Node.
pub const MAX_EXT_POOLS: u32 = 4096;
/// Data of `jn_ext_pools`'s key: the prefix's address as it sits in packets; the
/// prefix length is the trie key's.
pub type ExtPoolKey = [u8; 4];
/// `jn_ext_pools`: this Node announces the prefix (or another Node does, and this one
/// too): a direct ElasticIP in it is turned around here (`EXTERNAL_ADDRESS_DELIVERED_HERE`).
pub const EXT_HERE: u32 = 1;
/// `jn_ext_pools`: only another Node announces the prefix (a BGPAdvertisement pinned by
/// `nodeName`): a direct NIC's packet to it leaves by the Node's routing table, as the
/// upstream would deliver it (`EXTERNAL_ADDRESS_DELIVERED_ELSEWHERE`).
pub const EXT_ELSEWHERE: u32 = 2;

/// Value of `jn_eip_direct`, keyed by the ElasticIP (network order, as in packets).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EipEntry {
    /// The holder NIC's MAC.
    pub pod_mac: FdbKey,
    /// The ExternalNetwork's networkID (for an attached ElasticIP, its Subnet's VNI):
    /// the VNI the packet is carried with, and the segment whose table holds the NIC's
    /// pinned entry on its Node.
    pub vni: u32,
    /// The VTEP of the holder's Node (host order, as tunnel keys carry it).
    pub vtep: u32,
    /// On the holder's Node: its port, so delivery reads the port (an array slot)
    /// instead of the segment's slot and learning table (two hash lookups). Trusted
    /// only while that port is a direct NIC (or, attached, a Subnet NIC) with
    /// `pod_mac`; 0 elsewhere.
    pub ifindex: u32,
    /// 0: the NIC holds the ElasticIP itself (or none does yet). Else the ElasticIP is
    /// attached to a Subnet NIC of this address (network order) by an
    /// ElasticIPAttachment, and packets to it are given that address (1:1 NAT,
    /// NAT-03). A zero in what was padding keeps an older daemon's entries meaning
    /// what they meant: no layout change.
    pub pod_ip: u32,
}

/// Value of `jn_ext_arp`, keyed by an address this Node answers ARP for (network
/// order): the MAC it answers with (its uplink's).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtArp {
    pub mac: FdbKey,
}

/// The MAC of 169.254.0.1 for the direct NICs of ExternalNetwork `vni` (the host
/// veth's), and the source of what the datapath delivers to them: the same on every
/// Node, so a NIC's neighbour entry survives nothing but a change of network.
pub const fn gateway_mac(vni: u32) -> [u8; 6] {
    let b = vni.to_be_bytes();
    [0x02, 0x6a, b[0], b[1], b[2], b[3]]
}

const _: () = assert!(core::mem::size_of::<EipEntry>() == 24);
const _: () = assert!(core::mem::size_of::<ExtArp>() == 8);
