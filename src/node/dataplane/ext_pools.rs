//! The writer of `jn_ext_pools` (EIP-14): how this Node delivers each prefix some
//! Node announces by BGP. Written whole from the wanted set, new and changed entries
//! first and stale ones last, so a prefix that changes hands is never missing in
//! between (a missing entry turns a direct NIC's packet around, the old behaviour).
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::maps::{
    MapData,
    lpm_trie::{Key, LpmTrie},
};
use ipnet::Ipv4Net;
use juneau_common::{
    eip::{EXT_ELSEWHERE, EXT_HERE, ExtPoolKey},
    map_names,
};

use super::{Dataplane, DataplaneError, map_err};

/// How a Node delivers an announced prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Delivery {
    /// This Node announces it (`EXTERNAL_ADDRESS_DELIVERED_HERE`): a direct ElasticIP
    /// in it is turned around here.
    Here,
    /// Only another Node does (`EXTERNAL_ADDRESS_DELIVERED_ELSEWHERE`): a direct NIC's
    /// packet to it leaves for the upstream.
    Elsewhere,
}

impl Delivery {
    fn raw(self) -> u32 {
        match self {
            Delivery::Here => EXT_HERE,
            Delivery::Elsewhere => EXT_ELSEWHERE,
        }
    }

    /// `None` for a value no layout writes.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            EXT_HERE => Some(Delivery::Here),
            EXT_ELSEWHERE => Some(Delivery::Elsewhere),
            _ => None,
        }
    }
}

fn key(net: &Ipv4Net) -> Key<ExtPoolKey> {
    Key::new(u32::from(net.prefix_len()), net.network().octets())
}

/// The key's prefix back; `None` for a length past 32 (no writer makes one).
pub fn prefix_of(k: &Key<ExtPoolKey>) -> Option<Ipv4Net> {
    Ipv4Net::new(Ipv4Addr::from(k.data()), u8::try_from(k.prefix_len()).ok()?).ok()
}

/// `jn_ext_pools`. Made by [`Dataplane::take_ext_pools`].
pub struct ExtPoolWriter {
    map: LpmTrie<MapData, ExtPoolKey, u32>,
}

impl Dataplane {
    /// Hands `jn_ext_pools` to its writer: from now on only it writes the map.
    pub fn take_ext_pools(&mut self) -> Result<ExtPoolWriter, DataplaneError> {
        Ok(ExtPoolWriter {
            map: self.take_map(map_names::EXT_POOLS)?,
        })
    }
}

impl ExtPoolWriter {
    /// Makes the map hold exactly `want`; returns the entries written or removed.
    pub fn set(&mut self, want: &BTreeMap<Ipv4Net, Delivery>) -> Result<usize, DataplaneError> {
        let name = map_names::EXT_POOLS;
        let have = self.raw()?;
        let mut changed = 0;
        for (net, d) in want {
            if have.get(net) != Some(&d.raw()) {
                self.map
                    .insert(&key(net), d.raw(), 0)
                    .map_err(map_err(name))?;
                changed += 1;
            }
        }
        for net in have.keys().filter(|n| !want.contains_key(n)) {
            self.map.remove(&key(net)).map_err(map_err(name))?;
            changed += 1;
        }
        Ok(changed)
    }

    /// The map as written (a value of no `Delivery` left out: no writer makes one).
    pub fn read(&self) -> Result<BTreeMap<Ipv4Net, Delivery>, DataplaneError> {
        Ok(self
            .raw()?
            .into_iter()
            .filter_map(|(net, v)| Some((net, Delivery::from_raw(v)?)))
            .collect())
    }

    fn raw(&self) -> Result<BTreeMap<Ipv4Net, u32>, DataplaneError> {
        let name = map_names::EXT_POOLS;
        let mut out = BTreeMap::new();
        for item in self.map.iter() {
            let (k, v) = item.map_err(map_err(name))?;
            if let Some(net) = prefix_of(&k) {
                out.insert(net, v);
            }
        }
        Ok(out)
    }
}
