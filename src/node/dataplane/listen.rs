//! Listener lists (`jn_gw_listen`, by segment slot): the Nodes that have endpoints but no
//! port of a gateway segment. A broadcast ARP packet of the segment is copied to them
//! (no flood reaches them), so that their routers learn hosts Juneau did not address
//! and route to them like every other Node (L2-18, ★).
use std::collections::BTreeSet;

use aya::maps::Array;
use juneau_common::{RemoteList, map_names};

use super::{Dataplane, DataplaneError, map_err};

impl Dataplane {
    /// Every other Node that has endpoints (VTEPs, host order): those that route, and
    /// so may need to learn. Rewrites the lists when the set changed.
    pub fn set_listen_nodes(&mut self, nodes: BTreeSet<u32>) -> Result<usize, DataplaneError> {
        if nodes == self.listen_nodes {
            return Ok(0);
        }
        self.listen_nodes = nodes;
        self.write_listen_lists()
    }

    /// Writes the list of every segment this Node has a port of.
    pub(super) fn write_listen_lists(&mut self) -> Result<usize, DataplaneError> {
        let vnis: Vec<u32> = self.segments.vnis().collect();
        for vni in &vnis {
            self.write_listen_list(*vni)?;
        }
        Ok(vnis.len())
    }

    /// Writes segment `vni`'s list into its slot: the listening Nodes that are not in its
    /// remote list (those get the flood already); empty for a segment without gateway.
    pub(super) fn write_listen_list(&mut self, vni: u32) -> Result<(), DataplaneError> {
        let Some(slot) = self.segments.get(vni).map(|s| s.slot) else {
            return Ok(());
        };
        let list = if self.gateways.contains_key(&vni) {
            self.segments.listen_list(vni, &self.listen_nodes)
        } else {
            RemoteList::default()
        };
        let mut lists: Array<_, RemoteList> = Array::try_from(self.map_mut(map_names::GW_LISTEN)?)
            .map_err(map_err(map_names::GW_LISTEN))?;
        lists
            .set(slot, list, 0)
            .map_err(map_err(map_names::GW_LISTEN))
    }

    /// The listener list of segment `vni` as written (for tests and dumps).
    pub fn listen_list(&self, vni: u32) -> Result<Vec<u32>, DataplaneError> {
        let Some(slot) = self.segments.get(vni).map(|s| s.slot) else {
            return Ok(Vec::new());
        };
        let lists: Array<_, RemoteList> = Array::try_from(self.map(map_names::GW_LISTEN)?)
            .map_err(map_err(map_names::GW_LISTEN))?;
        let list = lists.get(&slot, 0).map_err(map_err(map_names::GW_LISTEN))?;
        Ok(list.vteps[..list.count as usize].to_vec())
    }
}
