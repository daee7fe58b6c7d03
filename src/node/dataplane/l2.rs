//! L2Network map writes: ports (`jn_l2_port`), one learning table per segment
//! (`jn_l2_fdb`), flood lists (`jn_l2_flood`), VNI -> slot (`jn_l2_vni`), and the sweeps
//! that delete learned entries (a port or Node gone, aging).
use std::{net::Ipv4Addr, time::Duration};

use aya::maps::{Array, ArrayOfMaps, HashMap as BpfHashMap, Map, MapData};
use juneau_common::{
    FdbEntry, FdbKey, FloodList, PortConfig,
    l2::{FDB_ENTRIES, MAX_PORTS},
    map_names,
    port::{PORT_ACTIVE, PORT_EIP, PORT_PEER, PORT_ROUTED, PORT_SG},
    prog_names,
};

use super::{Dataplane, DataplaneError, map_err};
use crate::node::{netlink, veth};

/// A port to configure: a host-side interface and the segment it belongs to.
#[derive(Clone, Copy, Debug)]
pub struct PortSpec {
    pub ifindex: u32,
    pub vni: u32,
    /// Segment MTU (L2-21); 0 disables the check.
    pub mtu: u32,
    /// The interface is a veth whose peer is in another namespace (a Pod NIC).
    pub peer: bool,
    /// The NIC carries SecurityGroups (`PORT_SG`): until the policy feature has written
    /// its groups, what it sends and receives is denied.
    pub security_groups: bool,
    /// What the port is, by its NIC's kind.
    pub kind: PortKind,
}

/// What a port is to the datapath, by the kind of its NIC: the one place its `PORT_*`
/// kind bits and the sources it is held to come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// An L2Network NIC: a port of its segment's switch (learns, floods, any
    /// EtherType).
    Switched,
    /// A Subnet NIC: routed, and held to its own MAC and address.
    Subnet { mac: [u8; 6], ip: Ipv4Addr },
    /// A direct ElasticIP NIC (`ip` is the ElasticIP, the port's VNI its network's
    /// networkID): routed by its own program, and 169.254.0.1 answered with the
    /// network's gateway MAC.
    ElasticIp { mac: [u8; 6], ip: Ipv4Addr },
}

impl PortKind {
    /// The kind's `PORT_*` bits (`PORT_ACTIVE`, `PORT_PEER` and `PORT_GATEWAY` are the
    /// port's, not the kind's).
    pub fn flags(self) -> u32 {
        match self {
            PortKind::Switched => 0,
            PortKind::Subnet { .. } => PORT_ROUTED,
            PortKind::ElasticIp { .. } => PORT_ROUTED | PORT_EIP,
        }
    }

    /// The program the port's ingress runs: a routed port gets its own program
    /// attached directly (the router, or a direct ElasticIP NIC's port), so its
    /// packets pay neither `port_ingress`'s lookup nor a tail call; a switched port
    /// gets `port_ingress`, which hands the router only what is for it.
    pub fn program(self) -> &'static str {
        port_program(self.flags())
    }

    /// The only MAC and address a routed port may send from; `None` for a switched one.
    pub fn held_to(self) -> Option<([u8; 6], Ipv4Addr)> {
        match self {
            PortKind::Switched => None,
            PortKind::Subnet { mac, ip } | PortKind::ElasticIp { mac, ip } => Some((mac, ip)),
        }
    }
}

/// The program a port of these `PORT_*` flags runs (see [`PortKind::program`]); also
/// what adoption gives a port whose flags it read back from the maps.
pub fn port_program(flags: u32) -> &'static str {
    if flags & PORT_ROUTED == 0 {
        prog_names::PORT_INGRESS
    } else if flags & PORT_EIP != 0 {
        prog_names::EIP_PORT
    } else {
        prog_names::GW_ROUTE
    }
}

/// Whether `prog` is one a port runs.
pub fn is_port_program(prog: &str) -> bool {
    [
        prog_names::PORT_INGRESS,
        prog_names::GW_ROUTE,
        prog_names::EIP_PORT,
    ]
    .contains(&prog)
}

impl PortSpec {
    fn sg_flag(&self) -> u32 {
        if self.security_groups { PORT_SG } else { 0 }
    }

    /// Whether `config` is this port as written whole: active, on the segment, of the
    /// same kind and held to the same MAC and address.
    pub fn written_as(&self, config: &PortConfig) -> bool {
        let kind_bits = PORT_ROUTED | PORT_EIP | PORT_SG;
        config.flags & PORT_ACTIVE != 0
            && config.vni == self.vni
            && config.flags & kind_bits == self.kind.flags() | self.sg_flag()
            && self.kind.held_to().is_none_or(|(mac, ip)| {
                config.own_mac.mac == mac && config.own_ip == u32::from_ne_bytes(ip.octets())
            })
    }
}

impl Dataplane {
    /// Attaches the port program to `ifname` (in the calling thread's namespace) and
    /// configures it as a port. Refuses interfaces Juneau did not create (MX-02). On
    /// failure nothing stays attached or written. A port adopted from a previous
    /// daemon is configured again without a second attachment.
    pub fn attach_port(&mut self, ifname: &str, spec: PortSpec) -> Result<u32, DataplaneError> {
        let ifindex = netlink::owned_ifindex(ifname, veth::OWNER_ALIAS)?;
        self.attach_owned_port(ifname, PortSpec { ifindex, ..spec })
    }

    /// [`Dataplane::attach_port`] for a NIC driver that has just made `ifname`
    /// (`spec.ifindex`) with Juneau's alias itself, in the same netlink session: the
    /// ownership check (MX-02) is the creation.
    pub fn attach_owned_port(
        &mut self,
        ifname: &str,
        spec: PortSpec,
    ) -> Result<u32, DataplaneError> {
        let ifindex = spec.ifindex;
        let prog = spec.kind.program();
        if self.attached(ifindex, prog) {
            if self.segments.vni_of(ifindex) == Some(spec.vni) {
                return Ok(ifindex);
            }
            self.configure_port(spec)?;
            return Ok(ifindex);
        }
        // Another program runs there (another kind's, or `port_ingress` on a TCX link
        // an older daemon left): the new one goes on first, then the old one goes,
        // so that no frame meets the veth without a program. A filter is replaced in
        // place by the attach itself; a TCX link is detached after.
        let previous = if self.port_attached(ifindex) {
            self.links.remove(&ifindex)
        } else {
            None
        };
        let attached = match self.port_attach {
            super::PortAttach::Filter => self.attach_filter(prog, ifname),
            super::PortAttach::Tcx => self.attach(prog, ifname, ifindex).inspect(|_| {
                Self::drop_filter(ifname);
            }),
        };
        let link = match attached {
            Ok(link) => link,
            Err(e) => {
                if let Some(old) = previous {
                    self.links.insert(ifindex, old);
                }
                return Err(e);
            }
        };
        let switched = previous.is_some();
        if let Some(old) = previous {
            let tcx_link = match &old {
                super::Attachment::Pinned { .. } => true,
                super::Attachment::Filter { .. } => false,
                super::Attachment::Owned { .. } => self.port_attach == super::PortAttach::Tcx,
            };
            if tcx_link && let Err(e) = self.detach(old) {
                tracing::warn!(ifname, error = %e, "cannot detach the port's previous program");
            }
        }
        // A port already written as `spec` only had its program switched (read only
        // then: a new port's ADD makes no extra map read).
        let configured = switched && self.port(ifindex).is_ok_and(|p| spec.written_as(&p));
        if !configured && let Err(e) = self.configure_port(spec) {
            if let Err(undo) = self.detach(link) {
                tracing::warn!(ifname, error = %undo, "rollback: cannot detach");
            }
            return Err(e);
        }
        self.links.insert(ifindex, link);
        Ok(ifindex)
    }

    /// Writes a port's configuration (no attachment): the segment's table and lists
    /// first, the port entry last.
    pub fn configure_port(&mut self, spec: PortSpec) -> Result<(), DataplaneError> {
        if spec.ifindex >= MAX_PORTS {
            return Err(DataplaneError::IfindexTooLarge(spec.ifindex));
        }
        let flags = PORT_ACTIVE
            | if spec.peer { PORT_PEER } else { 0 }
            | spec.kind.flags()
            | spec.sg_flag();
        let change = self.segments.add_port(spec.vni, spec.ifindex, flags)?;
        let written = (|| {
            if change.segment_edge {
                self.create_fdb(change.vni, change.slot)?;
                self.write_remote_list(change.vni)?;
                self.write_listen_list(change.vni)?;
            }
            self.write_flood_list(change.vni, change.slot)?;
            let (gateway, gw_mac) = self.gateway_bits(spec.vni);
            let mut config = PortConfig {
                vni: spec.vni,
                segment: change.slot,
                flags: flags | gateway,
                mtu: spec.mtu,
                gw_mac,
                ..Default::default()
            };
            if let PortKind::ElasticIp { .. } = spec.kind {
                config.gw_mac = FdbKey::new(juneau_common::eip::gateway_mac(spec.vni));
            }
            if let Some((mac, ip)) = spec.kind.held_to() {
                config.own_mac = FdbKey::new(mac);
                config.own_ip = u32::from_ne_bytes(ip.octets());
                if flags & juneau_common::port::PORT_EIP == 0 {
                    config.public_ip = self.public_ip_of(spec.vni, config.own_ip);
                }
                self.pin_routed_mac(change.slot, spec.ifindex, flags, mac)?;
            }
            self.write_port(spec.ifindex, config)?;
            if change.segment_edge {
                let mut vnis: BpfHashMap<_, u32, u32> =
                    BpfHashMap::try_from(self.map_mut(map_names::L2_VNI)?)
                        .map_err(map_err(map_names::L2_VNI))?;
                vnis.insert(change.vni, change.slot, 0)
                    .map_err(map_err(map_names::L2_VNI))?;
            }
            Ok(())
        })();
        match &written {
            Ok(()) => tracing::debug!(
                ifindex = spec.ifindex,
                vni = spec.vni,
                slot = change.slot,
                new_segment = change.segment_edge,
                "port written"
            ),
            Err(e) => {
                // Roll back: deactivate the port, then forget what was made for it.
                if let Err(undo) = self.unconfigure_port(spec.ifindex) {
                    tracing::warn!(ifindex = spec.ifindex, error = %undo, cause = %e, "rollback incomplete");
                }
            }
        }
        written
    }

    /// Detaches (when attached) and unconfigures a port. Removing a port that is not
    /// one succeeds (idempotent).
    pub fn remove_port(&mut self, ifindex: u32) -> Result<(), DataplaneError> {
        if let Some(link) = self.links.remove(&ifindex) {
            // The interface may be gone already, which detached us; the pin still goes.
            if let Err(e) = self.detach(link) {
                tracing::debug!(ifindex, error = %e, "detach of a port whose interface is gone");
            }
        }
        self.unconfigure_port(ifindex)
    }

    /// The ports this datapath serves, by ifindex (adopted ones included).
    pub fn ports(&self) -> Vec<u32> {
        self.segments.ports().collect()
    }

    pub(super) fn unconfigure_port(&mut self, ifindex: u32) -> Result<(), DataplaneError> {
        let Some(change) = self.segments.remove_port(ifindex) else {
            return Ok(());
        };
        let mut ports: Array<_, PortConfig> = Array::try_from(self.map_mut(map_names::L2_PORT)?)
            .map_err(map_err(map_names::L2_PORT))?;
        ports
            .set(ifindex, PortConfig::default(), 0)
            .map_err(map_err(map_names::L2_PORT))?;
        if change.segment_edge {
            // The overlay stops delivering to the segment before its table goes.
            let mut vnis: BpfHashMap<_, u32, u32> =
                BpfHashMap::try_from(self.map_mut(map_names::L2_VNI)?)
                    .map_err(map_err(map_names::L2_VNI))?;
            if let Err(e) = vnis.remove(&change.vni) {
                tracing::warn!(vni = change.vni, error = %e, "jn_l2_vni entry already gone");
            }
            self.write_flood_list(change.vni, change.slot)?;
            self.fdbs.remove(&change.slot);
            Ok(())
        } else {
            // The port's entries go even when its list cannot be written: a pinned
            // entry (a routed port's) left behind would send its MAC to a dead ifindex.
            let listed = self.write_flood_list(change.vni, change.slot);
            self.forget(change.vni, |e| e.ifindex == ifindex)?;
            listed
        }
    }

    pub(super) fn create_fdb(&mut self, vni: u32, slot: u32) -> Result<(), DataplaneError> {
        let name = super::pins::fdb_map_name(vni);
        let obj = aya_obj::Map::new_from_params(
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_HASH as u32,
            size_of::<FdbKey>() as u32,
            size_of::<FdbEntry>() as u32,
            FDB_ENTRIES,
            0,
        );
        let inner = MapData::create(obj, &name, None).map_err(map_err(&name))?;
        let mut outer: ArrayOfMaps<_, MapData> =
            ArrayOfMaps::try_from(self.map_mut(map_names::L2_FDB)?)
                .map_err(map_err(map_names::L2_FDB))?;
        outer
            .set(slot, &inner, 0)
            .map_err(map_err(map_names::L2_FDB))?;
        self.fdbs.insert(slot, inner);
        Ok(())
    }

    fn write_flood_list(&mut self, vni: u32, slot: u32) -> Result<(), DataplaneError> {
        let list = self
            .segments
            .get(vni)
            .map(|s| s.flood_list())
            .unwrap_or_default();
        let mut lists: Array<_, FloodList> = Array::try_from(self.map_mut(map_names::L2_FLOOD)?)
            .map_err(map_err(map_names::L2_FLOOD))?;
        lists
            .set(slot, list, 0)
            .map_err(map_err(map_names::L2_FLOOD))
    }

    /// Deletes the learned entries of `vni` that match (a removed port, a Node that left):
    /// their MACs are flooded, and relearned wherever they reappear.
    pub(super) fn forget(
        &mut self,
        vni: u32,
        stale: impl Fn(&FdbEntry) -> bool,
    ) -> Result<usize, DataplaneError> {
        let Some(table) = self.segments.get(vni).and_then(|s| self.fdbs.get(&s.slot)) else {
            return Ok(0);
        };
        let mut map = open_fdb(table)?;
        let keys: Vec<FdbKey> = map
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(map_names::L2_FDB))?
            .into_iter()
            .filter(|(_, e)| stale(e))
            .map(|(k, _)| k)
            .collect();
        let mut removed = 0;
        for key in &keys {
            // An entry the aging sweep or a move removed meanwhile is gone either way.
            if map.remove(key).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Ages every learning table: entries not refreshed for `max_age` are deleted
    /// (L2-30). The clock is the datapath's (CLOCK_MONOTONIC_COARSE), never wall time.
    /// A routed port's own MAC is not learned and never ages: it goes with its port.
    pub fn age(&mut self, max_age: Duration) -> Result<usize, DataplaneError> {
        let now = monotonic_coarse_ns();
        let max = max_age.as_nanos() as u64;
        let vnis: Vec<u32> = self.segments.vnis().collect();
        let mut removed = 0;
        for vni in vnis {
            removed += self.forget(vni, |e| {
                e.flags & PORT_ROUTED == 0 && now.saturating_sub(e.last_seen_ns) > max
            })?;
        }
        Ok(removed)
    }

    /// A routed port never learns (its frames all go to the router): its one MAC is
    /// written with the port, so that routed and overlay frames find it from the first
    /// packet without a flood. Removed with the port (`forget` by ifindex).
    fn pin_routed_mac(
        &mut self,
        slot: u32,
        ifindex: u32,
        flags: u32,
        mac: [u8; 6],
    ) -> Result<(), DataplaneError> {
        let table = self.fdbs.get(&slot).ok_or(DataplaneError::NoTable(slot))?;
        let entry = FdbEntry {
            ifindex,
            flags,
            ..Default::default()
        };
        open_fdb(table)?
            .insert(FdbKey::new(mac), entry, 0)
            .map_err(map_err("jn_fdb"))
    }

    /// The learned table of a segment (empty when this Node has no port on it).
    pub fn fdb(&self, vni: u32) -> Result<Vec<(FdbKey, FdbEntry)>, DataplaneError> {
        match self.segments.get(vni).and_then(|s| self.fdbs.get(&s.slot)) {
            Some(table) => open_fdb(table)?
                .iter()
                .collect::<Result<Vec<_>, _>>()
                .map_err(map_err("jn_fdb")),
            None => Ok(Vec::new()),
        }
    }

    /// Fresh handles on the learning tables of the segments served here, by VNI; they
    /// stay valid without the Dataplane (counted by [`Dataplane::count_entries`]).
    pub fn fdb_tables(&self) -> Vec<(u32, BpfHashMap<MapData, FdbKey, FdbEntry>)> {
        self.segments
            .vnis()
            .filter_map(|vni| {
                let table = self.fdbs.get(&self.segments.get(vni)?.slot)?;
                open_fdb(table).ok().map(|m| (vni, m))
            })
            .collect()
    }

    /// The number of entries of each table (metrics).
    pub fn count_entries(
        tables: Vec<(u32, BpfHashMap<MapData, FdbKey, FdbEntry>)>,
    ) -> Vec<(u32, usize)> {
        tables
            .into_iter()
            .map(|(vni, t)| (vni, t.keys().filter(Result::is_ok).count()))
            .collect()
    }

    /// Writes a port's entry whole.
    pub(super) fn write_port(
        &mut self,
        ifindex: u32,
        config: PortConfig,
    ) -> Result<(), DataplaneError> {
        let mut ports: Array<_, PortConfig> = Array::try_from(self.map_mut(map_names::L2_PORT)?)
            .map_err(map_err(map_names::L2_PORT))?;
        ports
            .set(ifindex, config, 0)
            .map_err(map_err(map_names::L2_PORT))
    }

    /// The port configuration the datapath sees (including its learning cache).
    pub fn port(&self, ifindex: u32) -> Result<PortConfig, DataplaneError> {
        let ports: Array<_, PortConfig> =
            Array::try_from(self.map(map_names::L2_PORT)?).map_err(map_err(map_names::L2_PORT))?;
        ports.get(&ifindex, 0).map_err(map_err(map_names::L2_PORT))
    }
}

/// A second handle on a learning table, typed for reading and deleting.
pub(super) fn open_fdb(
    table: &MapData,
) -> Result<BpfHashMap<MapData, FdbKey, FdbEntry>, DataplaneError> {
    let id = table.info().map_err(map_err("jn_fdb"))?.id();
    let data = MapData::from_id(id).map_err(map_err("jn_fdb"))?;
    BpfHashMap::try_from(Map::HashMap(data)).map_err(map_err("jn_fdb"))
}

/// CLOCK_MONOTONIC_COARSE in ns: the clock of `bpf_ktime_get_coarse_ns`.
pub fn monotonic_coarse_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE)
        .expect("clock_gettime");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A routed NIC's veth runs its own program; only a switched port runs
    /// `port_ingress` (which still hands a routed port's frames on, for test runs).
    #[test]
    fn each_port_kind_runs_its_own_program() {
        let (mac, ip) = ([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(PortKind::Switched.program(), prog_names::PORT_INGRESS);
        assert_eq!(PortKind::Subnet { mac, ip }.program(), prog_names::GW_ROUTE);
        assert_eq!(
            PortKind::ElasticIp { mac, ip }.program(),
            prog_names::EIP_PORT
        );
        // What adoption reads back: the flags as written, other bits beside them.
        let written = PORT_ACTIVE | PORT_SG | PortKind::Subnet { mac, ip }.flags();
        assert_eq!(port_program(written), prog_names::GW_ROUTE);
        assert!(is_port_program(prog_names::EIP_PORT));
        assert!(!is_port_program(prog_names::OVERLAY_INGRESS));
    }
}
