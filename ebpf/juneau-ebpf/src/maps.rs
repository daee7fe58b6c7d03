//! Map definitions. Names are the kernel's map names (and the pin names under the
//! daemon's bpffs folder), hence lower case with the `jn_` prefix.
#![allow(non_upper_case_globals)]

use aya_ebpf::{
    btf_maps::{Array, ArrayOfMaps, HashMap, LpmTrie, LruHashMap, PerCpuArray, ProgramArray},
    macros::btf_map,
};
use juneau_common::{
    DropReason, EipEntry, ExtArp, FdbEntry, FdbKey, FloodList, GwSegment, NbrEntry, NbrKey,
    NodeConfig, PortConfig, RemoteList, RouteEntry,
    ct::{CtEntry, CtKey, CtScratch, DEFAULT_ENTRIES, FRAG_ENTRIES, FragKey, FragPorts},
    eip::{ExtPoolKey, MAX_EIPS, MAX_EXT_ARP, MAX_EXT_POOLS},
    gw::{
        GwStat, IcmpBucket, MAX_GW_SEGMENTS, MAX_NEIGHBOURS, MAX_ROUTE_TABLES, MAX_SNOOPED,
        ROUTES_PER_TABLE, RouteAddr,
    },
    l2::{FDB_ENTRIES, MAX_PORTS, MAX_SEGMENTS},
    policy::{
        MAX_PEER_PREFIXES, MAX_PORT_PREFIXES, MAX_RULE_SETS, PeerKey, PolCounters, PolNic, PolSet,
        PortKey, RuleBits,
    },
    svc::{
        Affinity, AffinityKey, Backend, MAGLEV_FLAGS, MAGLEV_SLOTS, MAX_BACKENDS, MAX_SERVICES,
        SvcEntry, SvcHost, SvcKey,
    },
    tail::TAIL_SLOTS,
};

/// This Node's overlay (one entry).
#[btf_map]
pub static jn_node: Array<NodeConfig, 1> = Array::new();

/// Port configuration by ifindex (written by the daemon; the learning cache by us).
#[btf_map]
pub static jn_l2_port: Array<PortConfig, { MAX_PORTS as usize }> = Array::new();

/// VNI -> segment slot, for frames that arrive from the overlay.
#[btf_map]
pub static jn_l2_vni: HashMap<u32, u32, { MAX_SEGMENTS as usize }> = HashMap::new();

/// One learning table per segment slot (written by the datapath only: L2-29).
#[btf_map]
pub static jn_l2_fdb: ArrayOfMaps<Fdb, { MAX_SEGMENTS as usize }> = ArrayOfMaps::new();

/// One segment's learning table (an inner map of `jn_l2_fdb`).
pub type Fdb = HashMap<FdbKey, FdbEntry, { FDB_ENTRIES as usize }>;

/// Local ports of each segment slot, for broadcast / multicast / unknown unicast.
#[btf_map]
pub static jn_l2_flood: Array<FloodList, { MAX_SEGMENTS as usize }> = Array::new();

/// Other Nodes of each segment slot, reached after the local ports.
#[btf_map]
pub static jn_l2_remote: Array<RemoteList, { MAX_SEGMENTS as usize }> = Array::new();

/// Drop counters by reason.
#[btf_map]
pub static jn_drops: PerCpuArray<u64, { DropReason::SLOTS as usize }> = PerCpuArray::new();

/// Gateway segments by VNI (every Node holds every gateway segment of the cluster).
#[btf_map]
pub static jn_gw_seg: HashMap<u32, GwSegment, { MAX_GW_SEGMENTS as usize }> = HashMap::new();

/// One LPM trie per RouteTable, by local table slot; a changed table is built aside
/// and swapped in whole.
#[btf_map]
pub static jn_gw_rt: ArrayOfMaps<
    LpmTrie<RouteAddr, RouteEntry, { ROUTES_PER_TABLE as usize }>,
    { MAX_ROUTE_TABLES as usize },
> = ArrayOfMaps::new();

/// Neighbours of gateway segments: (VNI, address) -> MAC and Node.
#[btf_map]
pub static jn_gw_nbr: HashMap<NbrKey, NbrEntry, { MAX_NEIGHBOURS as usize }> = HashMap::new();

/// Neighbours learned from ARP (written by the datapath only).
#[btf_map]
pub static jn_gw_snoop: LruHashMap<NbrKey, NbrEntry, { MAX_SNOOPED as usize }> = LruHashMap::new();

/// By segment slot: the Nodes without a port of the (gateway) segment, which get a copy
/// of its broadcast ARP so that their routers learn hosts Juneau did not address.
#[btf_map]
pub static jn_gw_listen: Array<RemoteList, { MAX_SEGMENTS as usize }> = Array::new();

/// The one tail-call table: every program a hook enters (slots `juneau_common::tail`).
#[btf_map]
pub static jn_progs: ProgramArray<{ TAIL_SLOTS as usize }> = ProgramArray::new();

/// What the router did, by `GwStat`.
#[btf_map]
pub static jn_gw_stats: PerCpuArray<u64, { GwStat::SLOTS as usize }> = PerCpuArray::new();

/// The ICMP error budget of each CPU.
#[btf_map]
pub static jn_gw_icmp: PerCpuArray<IcmpBucket, 1> = PerCpuArray::new();

/// Every direct ElasticIP of the cluster (on every Node): its holder's MAC, network
/// and Node.
#[btf_map]
pub static jn_eip_direct: HashMap<u32, EipEntry, { MAX_EIPS as usize }> = HashMap::new();

/// The addresses this Node answers ARP for on its uplink (its ARPAdvertisements).
#[btf_map]
pub static jn_ext_arp: HashMap<u32, ExtArp, { MAX_EXT_ARP as usize }> = HashMap::new();

/// The prefixes of bgp pools some Node announces, by how this Node delivers them
/// (`eip::EXT_HERE`, `EXT_ELSEWHERE`; EIP-14). Looked up only for a direct ElasticIP
/// hit and for what nothing else on the uplink took.
#[btf_map]
pub static jn_ext_pools: LpmTrie<ExtPoolKey, u32, { MAX_EXT_POOLS as usize }> = LpmTrie::new();

/// The connection table: one direction of a connection per entry (Services now; the
/// NAT mapping and policy's allow record in the same entry later). Preallocated, so a
/// full table refuses new connections instead of evicting; sized at load by the
/// daemon's setting.
#[btf_map]
pub static jn_ct: HashMap<CtKey, CtEntry, { DEFAULT_ENTRIES as usize }> = HashMap::new();

/// A fragmented datagram's ports, for its later fragments (`ct::FragKey`).
#[btf_map]
pub static jn_frag: LruHashMap<FragKey, FragPorts, { FRAG_ENTRIES as usize }> = LruHashMap::new();

/// Per-CPU room for a new connection's entries while a stage builds them (the
/// Services' three, policy's two): the router's stack holds its own frame and the
/// stages'. Not pinned: nothing in it outlives a program run.
#[btf_map]
pub static jn_ct_scratch: PerCpuArray<CtScratch, 1> = PerCpuArray::new();

/// Service frontends: (ClusterIP, port, protocol) -> the Service's id and backends.
#[btf_map]
pub static jn_svc: HashMap<SvcKey, SvcEntry, { MAX_SERVICES as usize }> = HashMap::new();

/// Backends by id (the Maglev tables' values).
#[btf_map]
pub static jn_svc_backend: Array<Backend, { MAX_BACKENDS as usize }> = Array::new();

/// One Maglev table per Service id (slots -> backend ids), swapped in whole.
#[btf_map]
pub static jn_svc_maglev: ArrayOfMaps<
    Array<u32, { MAGLEV_SLOTS as usize }, { MAGLEV_FLAGS as usize }>,
    { MAX_SERVICES as usize },
> = ArrayOfMaps::new();

/// How this Node reaches backends through its own stack (one entry).
#[btf_map]
pub static jn_svc_host: Array<SvcHost, 1> = Array::new();

/// `sessionAffinity: ClientIP`: a client's backend and when it last came. An LRU:
/// losing an affinity under pressure costs a new backend, never a connection.
#[btf_map]
pub static jn_svc_affinity: LruHashMap<AffinityKey, Affinity, 65536> = LruHashMap::new();

/// NetworkACL and SecurityGroup rule sets by id (`policy`): each direction's header.
#[btf_map]
pub static jn_pol_set: HashMap<u32, PolSet, { MAX_RULE_SETS as usize }> = HashMap::new();

/// (set, direction, peer prefix) -> the rules whose peers hold it.
#[btf_map]
pub static jn_pol_peer: LpmTrie<PeerKey, RuleBits, { MAX_PEER_PREFIXES as usize }> = LpmTrie::new();

/// (set, direction, protocol, port prefix) -> the rules whose protocol and ports match.
#[btf_map]
pub static jn_pol_port: LpmTrie<PortKey, RuleBits, { MAX_PORT_PREFIXES as usize }> = LpmTrie::new();

/// A NIC's SecurityGroups by (VNI, address): the local NICs that carry some.
#[btf_map]
pub static jn_pol_nic: HashMap<NbrKey, PolNic, { MAX_PORTS as usize }> = HashMap::new();

/// The rules' epoch: bumped by the daemon at every change, so that connections are
/// judged again at their next packet.
#[btf_map]
pub static jn_pol_epoch: Array<u32, 1> = Array::new();

/// The routes' epoch: bumped by the daemon at every route or segment change, so that
/// a NATGateway connection's cached hop (`ct::NatHop`) is looked up again.
#[btf_map]
pub static jn_gw_epoch: Array<u32, 1> = Array::new();

/// Verdicts by (set, direction), per CPU.
#[btf_map]
pub static jn_pol_stats: PerCpuArray<PolCounters, { MAX_RULE_SETS as usize * 2 }> =
    PerCpuArray::new();
