//! The ElasticIP map writer: `jn_eip_direct` (every direct ElasticIP of the cluster,
//! by address) and `jn_ext_arp` (what this Node answers ARP for on its uplink). It owns
//! those maps (taken out of the loaded object by [`Dataplane::take_elastic_ips`]), so
//! the ElasticIP feature writes them under its own lock. Each is written whole from
//! the wanted set: new and changed entries first, stale ones last, so an ElasticIP
//! that moves is never missing in between.
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::maps::{HashMap as BpfHashMap, MapData};
use juneau_common::{EipEntry, ExtArp, FdbKey, map_names, port::PORT_ROUTED};

use super::{Dataplane, DataplaneError, map_err};

fn raw(ip: Ipv4Addr) -> u32 {
    u32::from_ne_bytes(ip.octets())
}

fn sync<V: aya::Pod + PartialEq>(
    map: &mut BpfHashMap<MapData, u32, V>,
    name: &'static str,
    want: &BTreeMap<u32, V>,
) -> Result<usize, DataplaneError> {
    let have: BTreeMap<u32, V> = map
        .iter()
        .collect::<Result<_, _>>()
        .map_err(map_err(name))?;
    let mut changed = 0;
    for (k, v) in want {
        if have.get(k) != Some(v) {
            map.insert(k, v, 0).map_err(map_err(name))?;
            changed += 1;
        }
    }
    for k in have.keys().filter(|k| !want.contains_key(k)) {
        map.remove(k).map_err(map_err(name))?;
        changed += 1;
    }
    Ok(changed)
}

/// Where an ElasticIP is held: by a NIC directly, or attached to a Subnet NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub mac: [u8; 6],
    /// The ExternalNetwork's networkID (attached: the Subnet's VNI).
    pub vni: u32,
    /// The holder's Node (its VTEP).
    pub node: Ipv4Addr,
    /// Attached by an ElasticIPAttachment (NAT-03): the Subnet NIC's own address, which
    /// packets to the ElasticIP are given.
    pub pod_ip: Option<Ipv4Addr>,
}

/// The local ports of direct ElasticIP NICs, by what they hold (address, raw, and
/// MAC): read from the port owner, so that delivery to a local holder skips the
/// segment's table.
pub type HeldPorts = BTreeMap<(u32, FdbKey), u32>;

/// The ElasticIP maps. Made by [`Dataplane::take_elastic_ips`].
pub struct ElasticIpWriter {
    direct: BpfHashMap<MapData, u32, EipEntry>,
    arp: BpfHashMap<MapData, u32, ExtArp>,
    /// The uplink's ifindex and MAC, read once per uplink (every sync asks).
    uplink: Option<(u32, [u8; 6])>,
}

impl Dataplane {
    /// Hands the ElasticIP maps to their writer: from now on only it writes them.
    pub fn take_elastic_ips(&mut self) -> Result<ElasticIpWriter, DataplaneError> {
        let direct = self.take_map(map_names::EIP_DIRECT)?;
        let arp = self.take_map(map_names::EXT_ARP)?;
        Ok(ElasticIpWriter {
            direct,
            arp,
            uplink: None,
        })
    }

    /// The ports of direct ElasticIP NICs and Subnet NICs (one may have an ElasticIP
    /// attached), by the address and MAC they are held to. A port that cannot be read
    /// is left out (delivery then takes the segment's table: slower, not wrong).
    pub fn held_ports(&self) -> HeldPorts {
        let mut local = HeldPorts::new();
        for ifindex in self.ports() {
            match self.port(ifindex) {
                Ok(port) if port.flags & PORT_ROUTED != 0 => {
                    local.insert((port.own_ip, port.own_mac), ifindex);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(ifindex, error = %e, "cannot read a port for the ElasticIP entries")
                }
            }
        }
        local
    }

    /// The uplink's ifindex (0 while the datapath has none).
    pub fn uplink_ifindex(&self) -> Result<u32, DataplaneError> {
        Ok(self.node_config()?.underlay_ifindex)
    }
}

impl ElasticIpWriter {
    /// Makes `jn_eip_direct` hold exactly `want`, each local holder pointing at its
    /// port in `local`; returns the entries written or removed.
    pub fn set_elastic_ips(
        &mut self,
        want: &BTreeMap<Ipv4Addr, Holder>,
        local: &HeldPorts,
    ) -> Result<usize, DataplaneError> {
        let want: BTreeMap<u32, EipEntry> = want
            .iter()
            .map(|(ip, h)| {
                let pod_mac = FdbKey::new(h.mac);
                (
                    raw(*ip),
                    EipEntry {
                        pod_mac,
                        vni: h.vni,
                        vtep: u32::from(h.node),
                        // An attached ElasticIP's port is the Subnet NIC's, held to
                        // the Pod's own address.
                        ifindex: local
                            .get(&(raw(h.pod_ip.unwrap_or(*ip)), pod_mac))
                            .copied()
                            .unwrap_or(0),
                        pod_ip: h.pod_ip.map_or(0, raw),
                    },
                )
            })
            .collect();
        sync(&mut self.direct, map_names::EIP_DIRECT, &want)
    }

    /// Makes `jn_ext_arp` hold exactly `want` (address -> the MAC answering for it).
    pub fn set_arp_answers(
        &mut self,
        want: &BTreeMap<Ipv4Addr, [u8; 6]>,
    ) -> Result<usize, DataplaneError> {
        let want: BTreeMap<u32, ExtArp> = want
            .iter()
            .map(|(ip, mac)| {
                (
                    raw(*ip),
                    ExtArp {
                        mac: FdbKey::new(*mac),
                    },
                )
            })
            .collect();
        sync(&mut self.arp, map_names::EXT_ARP, &want)
    }

    /// The uplink `ifindex` (from [`Dataplane::uplink_ifindex`]) with its MAC, which
    /// this Node answers ARP for its ElasticIPs with and sends gratuitous ARP from
    /// (`None` while the datapath has no uplink). The MAC is read from the kernel once
    /// per uplink.
    pub fn uplink(&mut self, ifindex: u32) -> Result<Option<(u32, [u8; 6])>, DataplaneError> {
        if ifindex == 0 {
            return Ok(None);
        }
        if let Some(known) = self.uplink.filter(|(i, _)| *i == ifindex) {
            return Ok(Some(known));
        }
        let read = (ifindex, crate::node::netlink::mac_of(ifindex)?);
        self.uplink = Some(read);
        Ok(Some(read))
    }

    /// `jn_eip_direct` as written (dumps and tests).
    pub fn elastic_ips(&self) -> Result<BTreeMap<Ipv4Addr, Holder>, DataplaneError> {
        Ok(self
            .direct
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(map_names::EIP_DIRECT))?
            .into_iter()
            .map(|(k, e)| {
                (
                    Ipv4Addr::from(k.to_ne_bytes()),
                    Holder {
                        mac: e.pod_mac.mac,
                        vni: e.vni,
                        node: Ipv4Addr::from(e.vtep),
                        pod_ip: (e.pod_ip != 0).then(|| Ipv4Addr::from(e.pod_ip.to_ne_bytes())),
                    },
                )
            })
            .collect())
    }

    /// `jn_ext_arp` as written.
    pub fn arp_answers(&self) -> Result<BTreeMap<Ipv4Addr, [u8; 6]>, DataplaneError> {
        Ok(self
            .arp
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(map_names::EXT_ARP))?
            .into_iter()
            .map(|(k, v)| (Ipv4Addr::from(k.to_ne_bytes()), v.mac.mac))
            .collect())
    }
}
