//! The prefixes of bgp pools as this Node delivers them (EIP-14, `jn_ext_pools`): a
//! range pinned by a BGPAdvertisement's `nodeName` to another Node is
//! `DELIVERED_ELSEWHERE` here, so a direct NIC's packet to an ElasticIP in it leaves
//! by the routing table for the upstream, which sends it to that Node, instead of
//! being turned around; an address of an announced pool that nothing here takes is
//! dropped rather than routed back to the upstream.
use aya_ebpf::maps::lpm_trie::Key;
use juneau_common::eip::EXT_ELSEWHERE;

use crate::maps;

/// How `daddr` (network order) is delivered: `EXT_HERE`, `EXT_ELSEWHERE`, or `None`
/// outside every announced prefix. The longest prefix decides.
#[inline(always)]
fn delivery(daddr: u32) -> Option<u32> {
    maps::jn_ext_pools
        .get(&Key::new(32, daddr.to_ne_bytes()))
        .copied()
}

/// Only another Node announces `daddr`'s range.
#[inline(always)]
pub fn elsewhere(daddr: u32) -> bool {
    delivery(daddr) == Some(EXT_ELSEWHERE)
}

/// Some Node announces `daddr`'s range.
#[inline(always)]
pub fn announced(daddr: u32) -> bool {
    delivery(daddr).is_some()
}
