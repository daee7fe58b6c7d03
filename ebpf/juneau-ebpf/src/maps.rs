//! Map definitions. Names are the kernel's map names (and the pin names under the
//! daemon's bpffs folder), hence lower case with the `jn_` prefix.
#![allow(non_upper_case_globals)]

use aya_ebpf::{
    btf_maps::{Array, ArrayOfMaps, HashMap, PerCpuArray},
    macros::btf_map,
};
use juneau_common::{
    DropReason, FdbEntry, FdbKey, FloodList, NodeConfig, PortConfig, RemoteList,
    l2::{FDB_ENTRIES, MAX_PORTS, MAX_SEGMENTS},
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
pub static jn_l2_fdb: ArrayOfMaps<
    HashMap<FdbKey, FdbEntry, { FDB_ENTRIES as usize }>,
    { MAX_SEGMENTS as usize },
> = ArrayOfMaps::new();

/// Local ports of each segment slot, for broadcast / multicast / unknown unicast.
#[btf_map]
pub static jn_l2_flood: Array<FloodList, { MAX_SEGMENTS as usize }> = Array::new();

/// Other Nodes of each segment slot, reached after the local ports.
#[btf_map]
pub static jn_l2_remote: Array<RemoteList, { MAX_SEGMENTS as usize }> = Array::new();

/// Drop counters by reason.
#[btf_map]
pub static jn_drops: PerCpuArray<u64, { DropReason::SLOTS as usize }> = PerCpuArray::new();
