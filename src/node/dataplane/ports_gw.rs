//! The port owner's side of the router: which segments have a gateway here (given by
//! the router's sync, [`Dataplane::set_gateways`]), the gateway bit and MAC of each
//! port of them, the tail-called programs in `jn_progs`, and the router's counters.
//! The router's own maps are its writer's (`gw.rs`); the port array is written here
//! only, so a port configured between two router syncs gets its gateway at once.
use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, RwLock},
};

use aya::maps::ProgramArray;
use juneau_common::{
    FdbKey,
    gw::GwStat,
    map_names,
    port::{PORT_ACL, PORT_EIP, PORT_GATEWAY},
    tail::TAIL_PROGRAMS,
};

use super::{Dataplane, DataplaneError, map_err, prog_err};

/// A segment the router serves, as its ports see it: the gateway's MAC, and whether
/// the segment has a NetworkACL (`PORT_ACL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gateway {
    pub mac: [u8; 6],
    pub acl: bool,
}

/// What [`Dataplane::served_segments`] hands out: the VNIs of the segments the router
/// serves, as its last sync set them.
pub type ServedSegments = Arc<RwLock<BTreeSet<u32>>>;

impl Dataplane {
    /// Puts this instance's tail-called programs (`juneau_common::tail`: the router,
    /// the ElasticIP port and uplink programs) into `jn_progs` (an adopted array gets
    /// each new program in one write: the next tail call enters it).
    pub(super) fn install_tail_programs(&mut self) -> Result<(), DataplaneError> {
        for (slot, name) in TAIL_PROGRAMS {
            let fd = self
                .program(name)
                .fd()
                .map_err(prog_err(name))?
                .try_clone()
                .map_err(|e| DataplaneError::Program {
                    name,
                    source: aya::programs::ProgramError::IOError(e),
                })?;
            let mut progs: ProgramArray<_> =
                ProgramArray::try_from(self.map_mut(map_names::PROGS)?)
                    .map_err(map_err(map_names::PROGS))?;
            progs.set(slot, &fd, 0).map_err(map_err(map_names::PROGS))?;
        }
        Ok(())
    }

    /// The segments the router serves now, with their gateway MACs and ACL bits: their
    /// ports get the gateway bit (or lose it) and their listener lists are written.
    /// Returns how many ports were written.
    pub fn set_gateways(
        &mut self,
        gateways: BTreeMap<u32, Gateway>,
    ) -> Result<usize, DataplaneError> {
        *self.served.write().expect("served segments lock") = gateways.keys().copied().collect();
        self.gateways = gateways;
        let ports = self.rewrite_port_gateways()?;
        // Only gateway segments have listeners.
        self.write_listen_lists()?;
        Ok(ports)
    }

    /// The segments the router serves (their ports get the gateway bit), readable
    /// without the datapath's lock: a CNI ADD asks before it plumbs anything, and a
    /// hundred of them queued behind the syncs and port writes that hold it.
    pub fn served_segments(&self) -> ServedSegments {
        self.served.clone()
    }

    /// The gateway bits (`PORT_GATEWAY`, `PORT_ACL`) and MAC a port of `vni` gets.
    pub(super) fn gateway_bits(&self, vni: u32) -> (u32, FdbKey) {
        match self.gateways.get(&vni) {
            Some(g) => (
                PORT_GATEWAY | if g.acl { PORT_ACL } else { 0 },
                FdbKey::new(g.mac),
            ),
            None => (0, FdbKey::default()),
        }
    }

    /// Sets or clears the gateway bit and MAC of every port whose segment's gateway
    /// changed. Returns how many ports were written.
    fn rewrite_port_gateways(&mut self) -> Result<usize, DataplaneError> {
        let ports: Vec<u32> = self.segments.ports().collect();
        let mut written = 0;
        for ifindex in ports {
            let Some(vni) = self.segments.vni_of(ifindex) else {
                continue;
            };
            let (bit, mac) = self.gateway_bits(vni);
            let mut port = self.port(ifindex)?;
            // A direct ElasticIP NIC's MAC for 169.254.0.1 is its network's, never a
            // segment gateway's.
            let direct = port.flags & PORT_EIP != 0;
            let bits = PORT_GATEWAY | PORT_ACL;
            if direct || (port.flags & bits == bit && port.gw_mac == mac) {
                continue;
            }
            port.flags = (port.flags & !bits) | bit;
            port.gw_mac = mac;
            self.write_port(ifindex, port)?;
            written += 1;
        }
        Ok(written)
    }

    /// The router's counters, summed over CPUs, by name.
    pub fn gw_stats(&self) -> Result<Vec<(&'static str, u64)>, DataplaneError> {
        let slots = GwStat::ALL
            .iter()
            .map(|s| (*s as u32, s.name()))
            .collect::<Vec<_>>();
        self.named_counters(map_names::GW_STATS, &slots)
    }
}
