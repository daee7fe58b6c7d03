//! The overlay's map writes: this Node's VXLAN device and underlay NIC (`jn_node`) and
//! the other Nodes of each segment (`jn_l2_remote`).
use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use aya::maps::Array;
use juneau_common::{NodeConfig, RemoteList, map_names, overlay::NODE_DEVICE_ONLY, prog_names};

use super::{Dataplane, DataplaneError, map_err};
use crate::node::{netlink, vxlan};

impl Dataplane {
    /// Attaches the overlay program to the Node's VXLAN device (made by
    /// [`vxlan::ensure`]) and records it as the way to other Nodes.
    pub fn attach_overlay(
        &mut self,
        ifname: &str,
        local_vtep: Ipv4Addr,
    ) -> Result<u32, DataplaneError> {
        let ifindex = netlink::owned_ifindex(ifname, vxlan::OWNER_ALIAS)?;
        let config = NodeConfig {
            vxlan_ifindex: ifindex,
            local_vtep: local_vtep.to_bits(),
            ..self.node_config()?
        };
        self.attach_node_program(prog_names::OVERLAY_INGRESS, ifname, ifindex, config)
    }

    /// Attaches the decapsulation program to the underlay NIC the VXLAN device sends by
    /// and turns on the datapath's own VXLAN encapsulation for known unicast IPv4 (see
    /// the eBPF `overlay::encap`). Call after [`Dataplane::attach_overlay`]; without it
    /// every frame between Nodes goes through the VXLAN device. The program passes
    /// everything but VXLAN frames for local Pods to the stack untouched.
    pub fn attach_underlay(&mut self, ifname: &str) -> Result<u32, DataplaneError> {
        let ifindex = netlink::ifindex(ifname)?;
        let config = self.node_config()?;
        if config.vxlan_ifindex == 0 {
            return Err(DataplaneError::NoOverlay);
        }
        let config = NodeConfig {
            underlay_ifindex: ifindex,
            flags: config.flags & !NODE_DEVICE_ONLY,
            ..config
        };
        self.attach_node_program(prog_names::UNDERLAY_INGRESS, ifname, ifindex, config)
    }

    /// Leaves every frame between Nodes to the VXLAN device (`own: false`) or takes
    /// known unicast back into the datapath (`own: true`), the underlay program staying
    /// attached for the ElasticIPs of its uplink. Call after
    /// [`Dataplane::attach_underlay`].
    pub fn set_own_encap(&mut self, own: bool) -> Result<(), DataplaneError> {
        let config = self.node_config()?;
        let flags = if own {
            config.flags & !NODE_DEVICE_ONLY
        } else {
            config.flags | NODE_DEVICE_ONLY
        };
        self.set_node_config(NodeConfig { flags, ..config })
    }

    /// Turns the datapath's own encapsulation off again (every frame between Nodes by
    /// the VXLAN device) and detaches the underlay program. Idempotent.
    pub fn detach_underlay(&mut self) -> Result<(), DataplaneError> {
        let config = self.node_config()?;
        if config.underlay_ifindex == 0 {
            return Ok(());
        }
        self.set_node_config(NodeConfig {
            underlay_ifindex: 0,
            ..config
        })?;
        if let Some(link) = self.links.remove(&config.underlay_ifindex) {
            self.detach(link)?;
        }
        Ok(())
    }

    /// Attaches `prog` to a Node-level interface and writes `config` to `jn_node`; on
    /// failure the program is detached again, so nothing is half-applied. An
    /// attachment adopted from a previous daemon is kept and only the config written.
    fn attach_node_program(
        &mut self,
        prog: &'static str,
        ifname: &str,
        ifindex: u32,
        config: NodeConfig,
    ) -> Result<u32, DataplaneError> {
        if self.attached(ifindex, prog) {
            self.set_node_config(config)?;
            return Ok(ifindex);
        }
        let link = self.attach(prog, ifname, ifindex)?;
        if let Err(e) = self.set_node_config(config) {
            if let Err(undo) = self.detach(link) {
                tracing::warn!(ifname, error = %undo, "rollback: cannot detach");
            }
            return Err(e);
        }
        self.links.insert(ifindex, link);
        Ok(ifindex)
    }

    pub(super) fn node_config(&self) -> Result<NodeConfig, DataplaneError> {
        Array::try_from(self.map(map_names::NODE)?)
            .and_then(|node: Array<_, NodeConfig>| node.get(&0, 0))
            .map_err(map_err(map_names::NODE))
    }

    fn set_node_config(&mut self, config: NodeConfig) -> Result<(), DataplaneError> {
        Array::try_from(self.map_mut(map_names::NODE)?)
            .and_then(|mut node: Array<_, NodeConfig>| node.set(0, config, 0))
            .map_err(map_err(map_names::NODE))
    }

    /// One more endpoint of segment `vni` lives on the Node `vtep`.
    pub fn add_remote(&mut self, vni: u32, vtep: Ipv4Addr) -> Result<(), DataplaneError> {
        if self.segments.add_remote(vni, vtep.to_bits())? {
            self.write_remote_list(vni)?;
        }
        Ok(())
    }

    /// Many endpoints at once: the bookkeeping first, then one write per segment whose
    /// remote list changed (a map update costs ~1.5 us; 10,000 endpoints over 100
    /// segments are 100 writes, not 10,000).
    pub fn add_remotes(&mut self, endpoints: &[(u32, Ipv4Addr)]) -> Result<(), DataplaneError> {
        let mut changed = BTreeSet::new();
        for (vni, vtep) in endpoints {
            if self.segments.add_remote(*vni, vtep.to_bits())? {
                changed.insert(*vni);
            }
        }
        for vni in changed {
            self.write_remote_list(vni)?;
        }
        Ok(())
    }

    /// Makes the remote lists exactly `want` (VNI -> other Node -> its endpoints of the
    /// segment), as read from the cluster's NetworkEndpoints. Only lists that change
    /// are written, so calling it with an unchanged cluster (or right after adopting a
    /// previous daemon's maps) writes nothing; MACs learned behind a Node that left a
    /// segment are forgotten. Returns the number of lists written.
    pub fn set_remotes(
        &mut self,
        want: &BTreeMap<u32, BTreeMap<u32, u32>>,
    ) -> Result<usize, DataplaneError> {
        let mut written = 0;
        let (changed, refused) = self.segments.set_remotes(want);
        for e in refused {
            tracing::error!(error = %e, "remote list kept as it was");
        }
        for (vni, left) in changed {
            self.write_remote_list(vni)?;
            self.write_listen_list(vni)?;
            written += 1;
            for vtep in left {
                self.forget(vni, |e| e.vtep == vtep)?;
            }
        }
        if written > 0 {
            tracing::debug!(lists = written, "remote lists written");
        }
        Ok(written)
    }

    /// Writes the remote list of `vni` into its slot, if this Node has the segment.
    pub(super) fn write_remote_list(&mut self, vni: u32) -> Result<(), DataplaneError> {
        let Some(slot) = self.segments.get(vni).map(|s| s.slot) else {
            return Ok(());
        };
        let list = self.segments.remote_list(vni);
        let mut lists: Array<_, RemoteList> = Array::try_from(self.map_mut(map_names::L2_REMOTE)?)
            .map_err(map_err(map_names::L2_REMOTE))?;
        lists
            .set(slot, list, 0)
            .map_err(map_err(map_names::L2_REMOTE))
    }
}
