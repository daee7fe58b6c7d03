//! L2Network segments on one Node: which local slot serves which VNI, and which ports
//! each segment floods to. Pure bookkeeping; [`super::Dataplane`] writes the result to
//! the maps.
use std::collections::{BTreeMap, BTreeSet};

use juneau_common::{
    FloodList, FloodPort, RemoteList,
    l2::{MAX_FLOOD_PORTS, MAX_REMOTE_VTEPS, MAX_SEGMENTS},
};

use crate::alloc::Pool;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum L2Error {
    #[error(
        "this Node already serves {MAX_SEGMENTS} L2Networks (the size of jn_l2_fdb); remove a segment's NICs from this Node first"
    )]
    TooManySegments,
    #[error(
        "L2Network with VNI {vni} already has {MAX_FLOOD_PORTS} NICs on this Node, the most one broadcast can reach; schedule the Pod on another Node"
    )]
    TooManyPorts { vni: u32 },
    #[error(
        "L2Network with VNI {vni} spans more than {MAX_REMOTE_VTEPS} other Nodes, the most one broadcast can reach"
    )]
    TooManyRemotes { vni: u32 },
    #[error("interface {ifindex} is already a port of VNI {vni}")]
    PortInUse { ifindex: u32, vni: u32 },
}

/// One segment on this Node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub slot: u32,
    /// ifindex -> `PORT_*` flags, in ifindex order (the order copies are sent).
    pub ports: BTreeMap<u32, u32>,
}

impl Segment {
    pub fn flood_list(&self) -> FloodList {
        let mut list = FloodList::default();
        for (i, (&ifindex, &flags)) in self.ports.iter().take(MAX_FLOOD_PORTS).enumerate() {
            list.ports[i] = FloodPort { ifindex, flags };
        }
        list.count = self.ports.len().min(MAX_FLOOD_PORTS) as u32;
        list
    }
}

/// What adding or removing a port changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub vni: u32,
    pub slot: u32,
    /// The segment was created by this add / emptied by this remove.
    pub segment_edge: bool,
}

#[derive(Debug)]
pub struct Segments {
    by_vni: BTreeMap<u32, Segment>,
    port_vni: BTreeMap<u32, u32>,
    /// The segments' slots in the datapath's per-segment maps (lowest free first).
    slots: Pool<u32>,
    /// VNI -> remote VTEP -> number of endpoints of the segment on that Node. A Node is
    /// listed once, while any of its endpoints exists.
    remotes: BTreeMap<u32, BTreeMap<u32, u32>>,
}

impl Default for Segments {
    fn default() -> Self {
        Self {
            by_vni: BTreeMap::new(),
            port_vni: BTreeMap::new(),
            slots: Pool::new([(0, MAX_SEGMENTS - 1)]),
            remotes: BTreeMap::new(),
        }
    }
}

impl Segments {
    pub fn get(&self, vni: u32) -> Option<&Segment> {
        self.by_vni.get(&vni)
    }

    /// Every segment this Node has a port on.
    pub fn vnis(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_vni.keys().copied()
    }

    pub fn vni_of(&self, ifindex: u32) -> Option<u32> {
        self.port_vni.get(&ifindex).copied()
    }

    pub fn add_port(&mut self, vni: u32, ifindex: u32, flags: u32) -> Result<Change, L2Error> {
        if let Some(&other) = self.port_vni.get(&ifindex) {
            return Err(L2Error::PortInUse {
                ifindex,
                vni: other,
            });
        }
        let segment_edge = !self.by_vni.contains_key(&vni);
        if segment_edge {
            let slot = self.slots.first_free().ok_or(L2Error::TooManySegments)?;
            self.by_vni.insert(
                vni,
                Segment {
                    slot,
                    ports: BTreeMap::new(),
                },
            );
        }
        let segment = self.by_vni.get_mut(&vni).expect("inserted above");
        if segment.ports.len() >= MAX_FLOOD_PORTS {
            return Err(L2Error::TooManyPorts { vni });
        }
        segment.ports.insert(ifindex, flags);
        self.port_vni.insert(ifindex, vni);
        Ok(Change {
            vni,
            slot: segment.slot,
            segment_edge,
        })
    }

    /// Every port, by ifindex.
    pub fn ports(&self) -> impl Iterator<Item = u32> + '_ {
        self.port_vni.keys().copied()
    }

    /// Records a segment found in the maps of a previous daemon: its slot, ports and
    /// remote Nodes (each counted once until the cluster says how many endpoints it
    /// has there).
    pub fn adopt(
        &mut self,
        vni: u32,
        slot: u32,
        ports: &[(u32, u32)],
        vteps: &[u32],
    ) -> Result<(), L2Error> {
        self.slots
            .claim(slot)
            .map_err(|_| L2Error::TooManySegments)?;
        let segment = self.by_vni.entry(vni).or_insert(Segment {
            slot,
            ports: BTreeMap::new(),
        });
        for &(ifindex, flags) in ports {
            segment.ports.insert(ifindex, flags);
            self.port_vni.insert(ifindex, vni);
        }
        if !vteps.is_empty() {
            self.remotes
                .insert(vni, vteps.iter().map(|v| (*v, 1)).collect());
        }
        Ok(())
    }

    /// Replaces every remote count with `want` (VNI -> VTEP -> endpoints). Returns the
    /// segments whose list of Nodes changed, each with the Nodes that left it, and the
    /// segments refused for spanning more Nodes than a broadcast reaches (those keep
    /// their previous list; every other segment is updated).
    pub fn set_remotes(
        &mut self,
        want: &BTreeMap<u32, BTreeMap<u32, u32>>,
    ) -> (Vec<(u32, Vec<u32>)>, Vec<L2Error>) {
        let mut refused = Vec::new();
        let mut want = want.clone();
        want.retain(|vni, nodes| {
            let fits = nodes.len() <= MAX_REMOTE_VTEPS;
            if !fits {
                refused.push(L2Error::TooManyRemotes { vni: *vni });
            }
            fits
        });
        for e in &refused {
            if let L2Error::TooManyRemotes { vni } = e
                && let Some(old) = self.remotes.get(vni)
            {
                want.insert(*vni, old.clone());
            }
        }
        let want = &want;
        let mut changed = Vec::new();
        let vnis: BTreeSet<u32> = want.keys().chain(self.remotes.keys()).copied().collect();
        let empty = BTreeMap::new();
        for vni in vnis {
            let old = self.remotes.get(&vni).unwrap_or(&empty);
            let new = want.get(&vni).unwrap_or(&empty);
            if old.keys().ne(new.keys()) {
                let left = old
                    .keys()
                    .filter(|v| !new.contains_key(v))
                    .copied()
                    .collect();
                changed.push((vni, left));
            }
        }
        self.remotes = want
            .iter()
            .filter(|(_, n)| !n.is_empty())
            .map(|(v, n)| (*v, n.clone()))
            .collect();
        (changed, refused)
    }

    /// Counts one more endpoint of segment `vni` on the Node `vtep`. True when the
    /// Node joins the segment's remote list.
    pub fn add_remote(&mut self, vni: u32, vtep: u32) -> Result<bool, L2Error> {
        let nodes = self.remotes.entry(vni).or_default();
        if let Some(n) = nodes.get_mut(&vtep) {
            *n += 1;
            return Ok(false);
        }
        if nodes.len() >= MAX_REMOTE_VTEPS {
            return Err(L2Error::TooManyRemotes { vni });
        }
        nodes.insert(vtep, 1);
        Ok(true)
    }

    /// The other Nodes of segment `vni`, in address order.
    pub fn remote_list(&self, vni: u32) -> RemoteList {
        let mut list = RemoteList::default();
        if let Some(nodes) = self.remotes.get(&vni) {
            for (i, vtep) in nodes.keys().take(MAX_REMOTE_VTEPS).enumerate() {
                list.vteps[i] = *vtep;
            }
            list.count = nodes.len().min(MAX_REMOTE_VTEPS) as u32;
        }
        list
    }

    /// The Nodes of `nodes` that are not in segment `vni`'s remote list, in address
    /// order (the listeners of a gateway segment).
    pub fn listen_list(&self, vni: u32, nodes: &BTreeSet<u32>) -> RemoteList {
        let mut list = RemoteList::default();
        let remotes = self.remotes.get(&vni);
        let others = nodes
            .iter()
            .filter(|v| !remotes.is_some_and(|r| r.contains_key(*v)))
            .take(MAX_REMOTE_VTEPS);
        for (i, vtep) in others.enumerate() {
            list.vteps[i] = *vtep;
            list.count = i as u32 + 1;
        }
        list
    }

    /// Removes a port; `None` when it was not one.
    pub fn remove_port(&mut self, ifindex: u32) -> Option<Change> {
        let vni = self.port_vni.remove(&ifindex)?;
        let segment = self.by_vni.get_mut(&vni)?;
        segment.ports.remove(&ifindex);
        let slot = segment.slot;
        let segment_edge = segment.ports.is_empty();
        if segment_edge {
            self.by_vni.remove(&vni);
            self.slots.release(slot);
        }
        Some(Change {
            vni,
            slot,
            segment_edge,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_28_flood_list_holds_every_port_of_the_segment_only() {
        let mut s = Segments::default();
        let a = s.add_port(100, 7, 3).unwrap();
        let b = s.add_port(200, 8, 3).unwrap();
        s.add_port(100, 9, 3).unwrap();
        assert!(a.segment_edge && b.segment_edge);
        assert_ne!(a.slot, b.slot, "two VNIs never share a table (L2-22)");
        let list = s.get(100).unwrap().flood_list();
        assert_eq!(list.count, 2);
        assert_eq!((list.ports[0].ifindex, list.ports[1].ifindex), (7, 9));
        assert_eq!(s.get(200).unwrap().flood_list().count, 1);
    }

    #[test]
    fn l2_28_slot_is_freed_with_the_last_port_and_reused() {
        let mut s = Segments::default();
        let first = s.add_port(100, 7, 1).unwrap();
        assert_eq!(
            s.add_port(100, 7, 1),
            Err(L2Error::PortInUse {
                ifindex: 7,
                vni: 100
            })
        );
        let gone = s.remove_port(7).unwrap();
        assert!(gone.segment_edge);
        assert_eq!(s.remove_port(7), None);
        let again = s.add_port(300, 8, 1).unwrap();
        assert_eq!(again.slot, first.slot);
    }

    #[test]
    fn l2_28_a_remote_node_is_listed_once_however_many_endpoints_it_has() {
        let mut s = Segments::default();
        assert!(
            s.add_remote(100, 0x0a000002).unwrap(),
            "first endpoint lists the Node"
        );
        assert!(
            !s.add_remote(100, 0x0a000002).unwrap(),
            "second endpoint: listed once"
        );
        assert!(s.add_remote(100, 0x0a000001).unwrap());
        let list = s.remote_list(100);
        assert_eq!(list.count, 2);
        assert_eq!(&list.vteps[..2], &[0x0a000001, 0x0a000002]);
        assert_eq!(s.remote_list(200).count, 0);
    }

    #[test]
    fn l2_18_listeners_are_the_routing_nodes_outside_the_remote_list() {
        let mut s = Segments::default();
        s.add_remote(100, 0x0a000002).unwrap();
        let nodes: BTreeSet<u32> = [0x0a000002, 0x0a000003, 0x0a000004].into();
        let list = s.listen_list(100, &nodes);
        assert_eq!(list.count, 2);
        assert_eq!(&list.vteps[..2], &[0x0a000003, 0x0a000004]);
        assert_eq!(
            s.listen_list(200, &nodes).count,
            3,
            "no remotes: all listen"
        );
        assert_eq!(s.listen_list(100, &BTreeSet::new()).count, 0);
    }

    #[test]
    fn l2_28_set_remotes_reports_only_lists_that_change_and_who_left() {
        let mut s = Segments::default();
        s.adopt(7, 3, &[(10, 3)], &[0x0a000002]).unwrap();
        let want: BTreeMap<u32, BTreeMap<u32, u32>> =
            [(7, [(0x0a000002, 2)].into_iter().collect())]
                .into_iter()
                .collect();
        assert!(
            s.set_remotes(&want).0.is_empty(),
            "same Nodes: nothing to write"
        );
        let want: BTreeMap<u32, BTreeMap<u32, u32>> =
            [(7, [(0x0a000003, 1)].into_iter().collect())]
                .into_iter()
                .collect();
        assert_eq!(s.set_remotes(&want).0, vec![(7, vec![0x0a000002])]);
        assert_eq!(s.remote_list(7).vteps[0], 0x0a000003);
        assert_eq!(
            s.set_remotes(&BTreeMap::new()).0,
            vec![(7, vec![0x0a000003])]
        );
        assert_eq!(s.remote_list(7).count, 0);
        // One segment over the limit is refused alone; the others are updated.
        let big: BTreeMap<u32, u32> = (0..=MAX_REMOTE_VTEPS as u32).map(|v| (v + 1, 1)).collect();
        let want: BTreeMap<u32, BTreeMap<u32, u32>> =
            [(7, [(9, 1)].into_iter().collect()), (8, big)]
                .into_iter()
                .collect();
        let (changed, refused) = s.set_remotes(&want);
        assert_eq!(changed, vec![(7, vec![])]);
        assert_eq!(refused, vec![L2Error::TooManyRemotes { vni: 8 }]);
        assert_eq!(
            s.remote_list(7).count,
            1,
            "the segment within the limit is updated"
        );
        assert_eq!(
            s.remote_list(8).count,
            0,
            "the refused one keeps its (empty) list"
        );
        assert_eq!(s.get(7).unwrap().slot, 3, "adopted slot kept");
        assert_eq!(
            s.adopt(8, 3, &[], &[]),
            Err(L2Error::TooManySegments),
            "slot taken"
        );
    }

    #[test]
    fn l2_28_too_many_ports_is_refused_with_the_limit() {
        let mut s = Segments::default();
        for i in 0..MAX_FLOOD_PORTS as u32 {
            s.add_port(5, 10 + i, 1).unwrap();
        }
        let err = s.add_port(5, 1000, 1).unwrap_err();
        assert_eq!(err, L2Error::TooManyPorts { vni: 5 });
        assert!(err.to_string().contains(&format!("{MAX_FLOOD_PORTS} NICs")));
    }
}
