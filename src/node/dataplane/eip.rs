//! The ElasticIP maps: `jn_eip_direct` (every direct ElasticIP of the cluster, by
//! address) and `jn_ext_arp` (what this Node answers ARP for on its uplink). Each is
//! written whole from the wanted set: new and changed entries first, stale ones last,
//! so an ElasticIP that moves is never missing in between.
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::maps::{HashMap as BpfHashMap, MapData};
use juneau_common::{EipEntry, ExtArp, FdbKey, map_names, port::PORT_EIP};

use super::{Dataplane, DataplaneError, map_err};

fn raw(ip: Ipv4Addr) -> u32 {
    u32::from_ne_bytes(ip.octets())
}

fn sync<V: aya::Pod + PartialEq>(
    map: &mut BpfHashMap<&mut MapData, u32, V>,
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

/// Where a direct ElasticIP is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub mac: [u8; 6],
    /// The ExternalNetwork's networkID.
    pub vni: u32,
    /// The holder's Node (its VTEP).
    pub node: Ipv4Addr,
}

impl Dataplane {
    /// Makes `jn_eip_direct` hold exactly `want`; returns the entries written or removed.
    pub fn set_elastic_ips(
        &mut self,
        want: &BTreeMap<Ipv4Addr, Holder>,
    ) -> Result<usize, DataplaneError> {
        // The local holders' ports, by what they hold (address and MAC).
        let mut local: BTreeMap<(u32, FdbKey), u32> = BTreeMap::new();
        for ifindex in self.ports() {
            match self.port(ifindex) {
                Ok(port) if port.flags & PORT_EIP != 0 => {
                    local.insert((port.own_ip, port.own_mac), ifindex);
                }
                Ok(_) => {}
                // Delivery then takes the segment's table instead: slower, not wrong.
                Err(e) => {
                    tracing::warn!(ifindex, error = %e, "cannot read a port for the ElasticIP entries")
                }
            }
        }
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
                        ifindex: local.get(&(raw(*ip), pod_mac)).copied().unwrap_or(0),
                        pad: 0,
                    },
                )
            })
            .collect();
        let name = map_names::EIP_DIRECT;
        let mut map = BpfHashMap::try_from(self.map_mut(name)?).map_err(map_err(name))?;
        sync(&mut map, name, &want)
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
        let name = map_names::EXT_ARP;
        let mut map = BpfHashMap::try_from(self.map_mut(name)?).map_err(map_err(name))?;
        sync(&mut map, name, &want)
    }

    /// The uplink's ifindex and MAC, which this Node answers ARP for its ElasticIPs
    /// with and sends gratuitous ARP from (`None` while the datapath has no uplink).
    /// The MAC is read from the kernel once per uplink.
    pub fn uplink(&mut self) -> Result<Option<(u32, [u8; 6])>, DataplaneError> {
        let ifindex = self.node_config()?.underlay_ifindex;
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
        let name = map_names::EIP_DIRECT;
        let map: BpfHashMap<_, u32, EipEntry> =
            BpfHashMap::try_from(self.map(name)?).map_err(map_err(name))?;
        Ok(map
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(name))?
            .into_iter()
            .map(|(k, e)| {
                (
                    Ipv4Addr::from(k.to_ne_bytes()),
                    Holder {
                        mac: e.pod_mac.mac,
                        vni: e.vni,
                        node: Ipv4Addr::from(e.vtep),
                    },
                )
            })
            .collect())
    }

    /// `jn_ext_arp` as written.
    pub fn arp_answers(&self) -> Result<BTreeMap<Ipv4Addr, [u8; 6]>, DataplaneError> {
        let name = map_names::EXT_ARP;
        let map: BpfHashMap<_, u32, ExtArp> =
            BpfHashMap::try_from(self.map(name)?).map_err(map_err(name))?;
        Ok(map
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(name))?
            .into_iter()
            .map(|(k, v)| (Ipv4Addr::from(k.to_ne_bytes()), v.mac.mac))
            .collect())
    }
}
