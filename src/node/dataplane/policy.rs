//! The policy map writer: rule sets (`jn_pol_set`, the tries `jn_pol_peer` and
//! `jn_pol_port`), the SecurityGroups of this Node's NICs (`jn_pol_nic`) and the epoch
//! (`jn_pol_epoch`). It owns those maps (taken by [`Dataplane::take_policy`]), so the
//! policy feature writes them under its own lock.
//!
//! A changed set never shows half a change: its entries are written under its other
//! slot, its header (a hash value, replaced whole) switched to that slot, then the old
//! slot's entries removed; then the epoch is bumped so that established connections
//! are judged again by the new rules at their next packet. A removed set loses its
//! header first (whatever still names it denies), then its entries.
use std::{collections::BTreeMap, net::Ipv4Addr};

use aya::maps::{
    Array, HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuValues,
    lpm_trie::{Key, LpmTrie},
};
use juneau_common::{
    NbrKey, map_names,
    policy::{
        DIR_EGRESS, DIR_INGRESS, KEY_HEAD_BITS, PeerKey, PolCounters, PolNic, PolSet, PortKey,
        RuleBits, peer_key, port_key,
    },
};

use super::{Dataplane, DataplaneError, map_err};
use crate::features::policy::node::{Compiled, PolicyState};

/// What one sync changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicySync {
    pub sets: usize,
    pub nics: usize,
    /// The epoch after the sync (bumped when a set changed).
    pub epoch: u32,
}

/// The policy maps and the record of what they hold.
pub struct PolicyWriter {
    sets: BpfHashMap<MapData, u32, PolSet>,
    peers: LpmTrie<MapData, PeerKey, RuleBits>,
    ports: LpmTrie<MapData, PortKey, RuleBits>,
    nics: BpfHashMap<MapData, NbrKey, PolNic>,
    epoch: Array<MapData, u32>,
    stats: PerCpuArray<MapData, PolCounters>,
    /// Id -> what is written and under which slot; `None` until the first sync, which
    /// reads what a previous daemon left.
    written: Option<BTreeMap<u32, (Compiled, u32)>>,
    nics_written: BTreeMap<(u32, Ipv4Addr), [u16; 2]>,
}

impl Dataplane {
    /// The policy maps, for their feature to own.
    pub fn take_policy(&mut self) -> Result<PolicyWriter, DataplaneError> {
        Ok(PolicyWriter {
            sets: self.take_map(map_names::POL_SET)?,
            peers: self.take_map(map_names::POL_PEER)?,
            ports: self.take_map(map_names::POL_PORT)?,
            nics: self.take_map(map_names::POL_NIC)?,
            epoch: self.take_map(map_names::POL_EPOCH)?,
            stats: self.take_map(map_names::POL_STATS)?,
            written: None,
            nics_written: BTreeMap::new(),
        })
    }
}

fn peer(slot: u32, dir: u8, net: &ipnet::Ipv4Net) -> Key<PeerKey> {
    Key::new(
        KEY_HEAD_BITS + net.prefix_len() as u32,
        peer_key(slot, dir, net.network().octets()),
    )
}

fn port(slot: u32, dir: u8, (proto, start, len): (u8, u16, u8)) -> Key<PortKey> {
    Key::new(
        KEY_HEAD_BITS + len as u32,
        port_key(slot, dir, proto, start),
    )
}

impl PolicyWriter {
    /// Brings the maps to `want`.
    pub fn sync(&mut self, want: &PolicyState) -> Result<PolicySync, DataplaneError> {
        let mut done = PolicySync::default();
        let written = match self.written.take() {
            Some(w) => w,
            None => self.read_left()?,
        };
        let mut now = BTreeMap::new();
        let mut changed = false;
        for (id, set) in &want.sets {
            match written.get(id) {
                Some((old, slot)) if old == set => {
                    now.insert(*id, (old.clone(), *slot));
                }
                old => {
                    let slot = match old {
                        Some((_, s)) if *s == id * 2 => id * 2 + 1,
                        _ => id * 2,
                    };
                    self.write_entries(slot, set)?;
                    let header = PolSet {
                        slot,
                        ..set.header()
                    };
                    self.sets
                        .insert(id, header, 0)
                        .map_err(map_err(map_names::POL_SET))?;
                    if let Some((_, old_slot)) = old {
                        self.remove_entries(*old_slot)?;
                    }
                    now.insert(*id, (set.clone(), slot));
                    done.sets += 1;
                    changed = true;
                }
            }
        }
        for (id, (_, slot)) in &written {
            if want.sets.contains_key(id) {
                continue;
            }
            match self.sets.remove(id) {
                Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                Err(e) => return Err(map_err(map_names::POL_SET)(e)),
            }
            self.remove_entries(*slot)?;
            done.sets += 1;
            changed = true;
        }
        self.written = Some(now);
        done.nics = self.sync_nics(&want.nics)?;
        let epoch = self
            .epoch
            .get(&0, 0)
            .map_err(map_err(map_names::POL_EPOCH))?;
        done.epoch = if changed || done.nics > 0 {
            let next = epoch.wrapping_add(1);
            self.epoch
                .set(0, next, 0)
                .map_err(map_err(map_names::POL_EPOCH))?;
            next
        } else {
            epoch
        };
        Ok(done)
    }

    /// What a previous daemon left: each header's set as its slot holds it is not
    /// read back, so every set is written again once (under its other slot: no gap).
    fn read_left(&mut self) -> Result<BTreeMap<u32, (Compiled, u32)>, DataplaneError> {
        let mut left = BTreeMap::new();
        for item in self.sets.iter() {
            let (id, header) = item.map_err(map_err(map_names::POL_SET))?;
            // An empty record never equals a wanted set: it is written again.
            left.insert(id, (Compiled::default(), header.slot));
        }
        // Entries of slots no header names (a daemon killed between two writes).
        let named: Vec<u32> = left.values().map(|(_, s)| *s).collect();
        self.remove_entries_where(|slot| !named.contains(&slot))?;
        Ok(left)
    }

    fn write_entries(&mut self, slot: u32, set: &Compiled) -> Result<(), DataplaneError> {
        // A slot is written only when empty: clear what a killed daemon may have left.
        self.remove_entries(slot)?;
        for (dir, d) in [(DIR_INGRESS, &set.dirs[0]), (DIR_EGRESS, &set.dirs[1])] {
            for (net, bits) in d.peer_entries() {
                self.peers
                    .insert(&peer(slot, dir, &net), bits, 0)
                    .map_err(map_err(map_names::POL_PEER))?;
            }
            for (k, bits) in d.port_entries() {
                self.ports
                    .insert(&port(slot, dir, k), bits, 0)
                    .map_err(map_err(map_names::POL_PORT))?;
            }
        }
        Ok(())
    }

    fn remove_entries(&mut self, slot: u32) -> Result<(), DataplaneError> {
        self.remove_entries_where(|s| s == slot)
    }

    fn remove_entries_where(&mut self, gone: impl Fn(u32) -> bool) -> Result<(), DataplaneError> {
        let slot_of = |data: &[u8; 8]| (data[0] as u32) << 8 | data[1] as u32;
        let peers: Vec<Key<PeerKey>> = self
            .peers
            .keys()
            .filter_map(Result::ok)
            .filter(|k| gone(slot_of(&k.data())))
            .collect();
        for k in peers {
            let _ = self.peers.remove(&k);
        }
        let ports: Vec<Key<PortKey>> = self
            .ports
            .keys()
            .filter_map(Result::ok)
            .filter(|k| gone(slot_of(&k.data())))
            .collect();
        for k in ports {
            let _ = self.ports.remove(&k);
        }
        Ok(())
    }

    fn sync_nics(
        &mut self,
        want: &BTreeMap<(u32, Ipv4Addr), [u16; 2]>,
    ) -> Result<usize, DataplaneError> {
        let key = |(vni, ip): (u32, Ipv4Addr)| NbrKey {
            vni,
            ip: u32::from_ne_bytes(ip.octets()),
        };
        let mut changed = 0;
        let present: Vec<NbrKey> = self.nics.keys().filter_map(Result::ok).collect();
        for ((vni, ip), groups) in want {
            if self.nics_written.get(&(*vni, *ip)) == Some(groups) {
                continue;
            }
            self.nics
                .insert(key((*vni, *ip)), PolNic { groups: *groups }, 0)
                .map_err(map_err(map_names::POL_NIC))?;
            changed += 1;
        }
        for k in present {
            let ip = Ipv4Addr::from(k.ip.to_ne_bytes());
            if !want.contains_key(&(k.vni, ip)) {
                let _ = self.nics.remove(&k);
                changed += 1;
            }
        }
        self.nics_written = want.clone();
        Ok(changed)
    }

    /// Verdict counters by set id: ((ingress), (egress)), summed over CPUs.
    pub fn counters(&self, id: u32) -> Result<[PolCounters; 2], DataplaneError> {
        let mut out = [PolCounters::default(); 2];
        for (dir, slot) in out.iter_mut().enumerate() {
            let values: PerCpuValues<PolCounters> = self
                .stats
                .get(&(id * 2 + dir as u32), 0)
                .map_err(map_err(map_names::POL_STATS))?;
            for v in values.iter() {
                slot.allowed += v.allowed;
                slot.denied_by_rule += v.denied_by_rule;
                slot.denied_no_match += v.denied_no_match;
            }
        }
        Ok(out)
    }

    /// The epoch the datapath judges by.
    pub fn epoch(&self) -> Result<u32, DataplaneError> {
        self.epoch.get(&0, 0).map_err(map_err(map_names::POL_EPOCH))
    }
}
