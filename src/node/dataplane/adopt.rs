//! Taking over what a previous daemon of the same layout left pinned: the bookkeeping
//! is rebuilt from the maps (the kernel is the record), each pinned link is switched to
//! the programs just loaded (ports' tc filters replaced in place), and links to
//! interfaces that are gone are unpinned.
use aya::maps::{Array, ArrayOfMaps, HashMap as BpfHashMap, MapData};
use juneau_common::{FloodList, RemoteList, map_names, prog_names};

use super::{Attachment, Dataplane, DataplaneError, map_err, pins};
use crate::node::{netlink, veth};

/// What adoption found, for the daemon's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Adopted {
    pub segments: usize,
    pub ports: usize,
    pub links: usize,
    pub stale_links: usize,
}

impl Dataplane {
    pub(super) fn adopt(&mut self) -> Result<Adopted, DataplaneError> {
        let mut found = Adopted::default();
        let vnis: Vec<(u32, u32)> = {
            let map: BpfHashMap<_, u32, u32> = BpfHashMap::try_from(self.map(map_names::L2_VNI)?)
                .map_err(map_err(map_names::L2_VNI))?;
            map.iter()
                .collect::<Result<_, _>>()
                .map_err(map_err(map_names::L2_VNI))?
        };
        for (vni, slot) in vnis {
            let flood: FloodList = Array::try_from(self.map(map_names::L2_FLOOD)?)
                .and_then(|a: Array<_, FloodList>| a.get(&slot, 0))
                .map_err(map_err(map_names::L2_FLOOD))?;
            let remote: RemoteList = Array::try_from(self.map(map_names::L2_REMOTE)?)
                .and_then(|a: Array<_, RemoteList>| a.get(&slot, 0))
                .map_err(map_err(map_names::L2_REMOTE))?;
            let table: MapData = ArrayOfMaps::try_from(self.map(map_names::L2_FDB)?)
                .and_then(|a: ArrayOfMaps<_, MapData>| a.get(&slot, 0))
                .map_err(map_err(map_names::L2_FDB))?;
            let ports: Vec<(u32, u32)> = flood.ports[..flood.count as usize]
                .iter()
                .map(|p| (p.ifindex, p.flags))
                .collect();
            let vteps = &remote.vteps[..remote.count as usize];
            found.ports += ports.len();
            found.segments += 1;
            self.segments.adopt(vni, slot, &ports, vteps)?;
            self.fdbs.insert(slot, table);
        }
        let present = netlink::all_ifindexes()?;
        let layout = self.pins.clone().expect("adopt runs with a pin folder");
        for file in layout.links() {
            let Some(prog) = prog_names::ALL.iter().find(|p| **p == file.prog).copied() else {
                pins::unpin(&file.path)?;
                found.stale_links += 1;
                continue;
            };
            if !present.contains(&file.ifindex) {
                // The interface went while no daemon ran (a Pod deleted meanwhile).
                pins::unpin(&file.path)?;
                found.stale_links += 1;
                continue;
            }
            if let Err(e) = self.take_over_link(prog, &file.path) {
                // A link that cannot be updated (defunct, or on an interface that was
                // replaced) goes; the port is attached afresh by the reconcile.
                tracing::warn!(prog, ifindex = file.ifindex, error = %e, "unpinning a link that cannot be taken over");
                pins::unpin(&file.path)?;
                found.stale_links += 1;
                continue;
            }
            self.links.insert(
                file.ifindex,
                Attachment::Pinned {
                    prog,
                    path: file.path,
                },
            );
            found.links += 1;
        }
        // Ports carry tc filters, which have no pin: the filter of each port still
        // present (a Juneau veth: the alias is checked, MX-02) gets the program just
        // loaded, in place. A port whose filter cannot be taken over is dropped from the
        // datapath, so that the reconcile attaches it afresh from its NIC.
        let veths: std::collections::HashMap<u32, String> =
            netlink::links_with_alias(&format!("{}:", veth::OWNER_ALIAS))?
                .into_iter()
                .map(|(name, ifindex, _)| (ifindex, name))
                .collect();
        for ifindex in self.segments.ports().collect::<Vec<_>>() {
            if self.links.contains_key(&ifindex) {
                continue;
            }
            let Some(name) = veths.get(&ifindex) else {
                continue;
            };
            // The program of the port's kind, from its flags as the maps hold them (a
            // routed port an older daemon served through `port_ingress` gets its own).
            let prog = match self.port(ifindex) {
                Ok(config) => super::l2::port_program(config.flags),
                Err(e) => {
                    tracing::warn!(ifindex, error = %e, "cannot read a port's kind; port_ingress serves it");
                    prog_names::PORT_INGRESS
                }
            };
            match self.replace_filter(prog, name) {
                Ok(link) => {
                    self.links.insert(ifindex, link);
                    found.links += 1;
                }
                Err(e) => {
                    tracing::warn!(ifindex, error = %e, "cannot take over a port's filter; the reconcile attaches it again");
                    if let Err(e) = self.unconfigure_port(ifindex) {
                        // Unserved either way (the bookkeeping goes first): the
                        // reconcile writes it again.
                        tracing::warn!(ifindex, error = %e, "cannot unconfigure a port adoption dropped");
                    }
                }
            }
        }
        tracing::info!(
            segments = found.segments,
            ports = found.ports,
            links = found.links,
            stale_links = found.stale_links,
            "adopted the pinned datapath"
        );
        Ok(found)
    }
}
