//! The connection table (`jn_ct`): its size (set at load, from the daemon's setting),
//! its dump, and the sweep that collects expired connections (nothing else deletes:
//! the datapath only inserts and updates). Pinned like every map, so connections
//! outlive a daemon restart.
//!
//! The sweep reads a batch of entries, then deletes each pair whose both directions
//! are past their lifetime, reading each again just before (a packet that came
//! meanwhile keeps it). It holds no lock the datapath waits on: map reads and deletes
//! are the kernel's per-bucket operations.
use aya::maps::{HashMap as BpfHashMap, MapData};
use juneau_common::{
    ct::{
        CT_CLOSED, CT_CLOSING, CT_F_HAIRPIN, CT_F_NAT, CT_F_REPLY, CT_F_SERVICE, CT_F_SNAT,
        CtEntry, CtKey, HAIRPIN_IP, ZONE_HOST, timeout,
    },
    map_names,
};

use super::{Dataplane, DataplaneError, map_err, monotonic_coarse_ns};

/// The reply direction's key of a Service connection's original direction.
fn reply_key(key: &CtKey, e: &CtEntry) -> CtKey {
    CtKey {
        zone: key.zone,
        saddr: e.backend_ip,
        // A hairpin's reply goes to the address its client's source became.
        daddr: if e.flags & CT_F_HAIRPIN != 0 {
            HAIRPIN_IP
        } else {
            key.saddr
        },
        sport: e.backend_port,
        dport: key.sport,
        proto: key.proto,
        pad0: 0,
        pad1: 0,
    }
}

/// The key of the entry in [`ZONE_HOST`] that a connection with a translated source
/// (SVC-02) has besides its pair: its replies as the Node's stack routes them.
fn host_key(key: &CtKey, e: &CtEntry) -> CtKey {
    CtKey::new(
        ZONE_HOST,
        e.backend_ip,
        e.nat_ip,
        e.backend_port,
        e.nat_port,
        key.proto,
    )
}

/// The reply entry of a NATGateway connection (NAT-01): in [`ZONE_HOST`], from the
/// server to the address and port the client's source became.
fn nat_key(key: &CtKey, e: &CtEntry) -> CtKey {
    CtKey::new(
        ZONE_HOST, key.daddr, e.nat_ip, key.dport, e.nat_port, key.proto,
    )
}

/// Whether a connection whose directions are `a` and `b` is over at `now`: both quiet
/// past their lifetimes, or both closing (or one closed) and quiet past the short one.
fn expired(proto: u8, a: &CtEntry, b: Option<&CtEntry>, now: u64) -> bool {
    let quiet = |e: &CtEntry, for_ns: u64| now.saturating_sub(e.last_seen_ns) > for_ns;
    let Some(b) = b else {
        return quiet(a, a.lifetime(proto));
    };
    let closed = a.state == CT_CLOSED
        || b.state == CT_CLOSED
        || (a.state == CT_CLOSING && b.state == CT_CLOSING);
    if closed {
        return quiet(a, timeout::TCP_CLOSING) && quiet(b, timeout::TCP_CLOSING);
    }
    quiet(a, a.lifetime(proto)) && quiet(b, b.lifetime(proto))
}

/// The connection table's handle for its sweep and dumps (taken by
/// [`Dataplane::take_conntrack`]: the sweep runs on its own thread, never under the
/// port owner's lock).
pub struct Conntrack {
    map: BpfHashMap<MapData, CtKey, CtEntry>,
}

impl Dataplane {
    pub fn take_conntrack(&mut self) -> Result<Conntrack, DataplaneError> {
        Ok(Conntrack {
            map: self.take_map(map_names::CT)?,
        })
    }
}

impl Conntrack {
    /// Copies the connections of another layout's pinned table (`maps_dir/jn_ct`) into
    /// this one, so that a layout change resets none: the entry's types kept their
    /// size since layout 10 (the fields of later features were reserved in place).
    /// Entries this table has already (made by the new programs) are kept. A table of
    /// another entry size is left alone, and said so. Returns how many were copied.
    pub fn migrate_from(&mut self, maps_dir: &std::path::Path) -> Result<usize, DataplaneError> {
        let path = maps_dir.join(map_names::CT);
        if !path.exists() {
            return Ok(0);
        }
        let data = MapData::from_pin(&path).map_err(map_err(map_names::CT))?;
        let info = data.info().map_err(map_err(map_names::CT))?;
        let (k, v) = (info.key_size() as usize, info.value_size() as usize);
        if k != std::mem::size_of::<CtKey>() || v != std::mem::size_of::<CtEntry>() {
            tracing::warn!(
                path = %path.display(),
                key_size = k,
                value_size = v,
                "another layout's connection table has other entry types: not copied"
            );
            return Ok(0);
        }
        let old: BpfHashMap<MapData, CtKey, CtEntry> =
            BpfHashMap::try_from(aya::maps::Map::HashMap(data)).map_err(map_err(map_names::CT))?;
        const BPF_NOEXIST: u64 = 1;
        let mut copied = 0;
        for item in old.iter() {
            let Ok((key, entry)) = item else { continue };
            match self.map.insert(key, entry, BPF_NOEXIST) {
                Ok(()) => copied += 1,
                Err(aya::maps::MapError::SyscallError(e))
                    if e.io_error.raw_os_error() == Some(17) => {}
                Err(e) => return Err(map_err(map_names::CT)(e)),
            }
        }
        Ok(copied)
    }

    /// One entry, when the table holds it (tests and benchmarks).
    pub fn get(&self, key: &CtKey) -> Result<Option<CtEntry>, DataplaneError> {
        match self.map.get(key, 0) {
            Ok(e) => Ok(Some(e)),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(map_err(map_names::CT)(e)),
        }
    }

    /// Writes one entry (benchmarks fill the table as connections would).
    pub fn insert(&mut self, key: &CtKey, entry: &CtEntry) -> Result<(), DataplaneError> {
        self.map
            .insert(key, entry, 0)
            .map_err(map_err(map_names::CT))
    }

    /// Removes one entry; one that is not there is not an error.
    pub fn remove(&mut self, key: &CtKey) -> Result<(), DataplaneError> {
        match self.map.remove(key) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(map_err(map_names::CT)(e)),
        }
    }

    /// Every entry of the table (dumps and tests).
    pub fn entries(&self) -> Result<Vec<(CtKey, CtEntry)>, DataplaneError> {
        self.map
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err(map_names::CT))
    }

    /// Deletes the connections that are over (both directions); returns how many
    /// entries went. `now`: the datapath's clock ([`monotonic_coarse_ns`]) or a test's.
    pub fn sweep(&mut self, now: Option<u64>) -> Result<usize, DataplaneError> {
        let now = now.unwrap_or_else(monotonic_coarse_ns);
        let entries = self.entries()?;
        let map = &mut self.map;
        let mut removed = 0;
        for (key, e) in &entries {
            // Pairs are judged from their original direction; an entry without one (a
            // reply whose original went, or not a Service's) by itself.
            if e.flags & CT_F_REPLY != 0 {
                continue;
            }
            let pair = if e.flags & CT_F_SERVICE != 0 {
                Some(reply_key(key, e))
            } else if e.flags & CT_F_NAT != 0 {
                // A NATGateway's: its replies hit the entry in ZONE_HOST first.
                Some(nat_key(key, e))
            } else if e.policy != 0 {
                // A connection policy allowed: its reply is the tuple turned round.
                Some(CtKey::new(
                    key.zone, key.daddr, key.saddr, key.dport, key.sport, key.proto,
                ))
            } else {
                None
            };
            // Read again: a packet since the batch keeps the connection.
            let Ok(a) = map.get(key, 0) else { continue };
            let b = pair.and_then(|k| map.get(&k, 0).ok().map(|v| (k, v)));
            if !expired(key.proto, &a, b.as_ref().map(|(_, v)| v), now) {
                continue;
            }
            if map.remove(key).is_ok() {
                removed += 1;
            }
            if let Some((k, _)) = b
                && map.remove(&k).is_ok()
            {
                removed += 1;
            }
            if e.flags & CT_F_SNAT != 0 && map.remove(&host_key(key, e)).is_ok() {
                removed += 1;
            }
            // A NATGateway connection policy allowed: policy's reply entry goes too.
            if e.flags & CT_F_NAT != 0 && e.policy != 0 && map.remove(&key.reversed()).is_ok() {
                removed += 1;
            }
        }
        // Replies whose original direction is gone, quiet past their lifetime.
        for (key, e) in &entries {
            if e.flags & CT_F_REPLY == 0 {
                continue;
            }
            // A NATGateway's claim lives as long as its connection: it is only
            // refreshed by replies, and one gone while the client still sends from its
            // port would free the port for another Pod's connection to the same server.
            if e.flags & CT_F_NAT != 0 && key.zone == ZONE_HOST {
                let original = CtKey::new(
                    e.nat_zone, e.nat_ip, key.saddr, e.nat_port, key.sport, key.proto,
                );
                if map.get(&original, 0).is_ok() {
                    continue;
                }
            }
            if let Ok(v) = map.get(key, 0)
                && now.saturating_sub(v.last_seen_ns) > v.lifetime(key.proto)
                && map.remove(key).is_ok()
            {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use juneau_common::ct::{CT_ESTABLISHED, CT_NEW, PROTO_TCP, PROTO_UDP};

    use super::*;

    fn e(state: u8, last: u64) -> CtEntry {
        CtEntry {
            state,
            last_seen_ns: last,
            ..CtEntry::default()
        }
    }

    #[test]
    fn svc_03_entries_expire_by_protocol_state() {
        const S: u64 = 1_000_000_000;
        let now = 100_000 * S;
        // UDP: 60 s after the last packet of either direction.
        assert!(!expired(
            PROTO_UDP,
            &e(CT_ESTABLISHED, now - 59 * S),
            Some(&e(CT_ESTABLISHED, now - 61 * S)),
            now
        ));
        assert!(expired(
            PROTO_UDP,
            &e(CT_ESTABLISHED, now - 61 * S),
            Some(&e(CT_ESTABLISHED, now - 61 * S)),
            now
        ));
        // TCP established: hours, not minutes.
        assert!(!expired(
            PROTO_TCP,
            &e(CT_ESTABLISHED, now - 3600 * S),
            Some(&e(CT_ESTABLISHED, now - 3600 * S)),
            now
        ));
        // An unanswered SYN: a minute.
        assert!(expired(
            PROTO_TCP,
            &e(CT_NEW, now - 61 * S),
            Some(&e(CT_NEW, now - 61 * S)),
            now
        ));
        // Closed by FIN both ways or an RST: ten seconds.
        assert!(expired(
            PROTO_TCP,
            &e(CT_CLOSING, now - 11 * S),
            Some(&e(CT_CLOSING, now - 11 * S)),
            now
        ));
        assert!(!expired(
            PROTO_TCP,
            &e(CT_CLOSING, now - 11 * S),
            Some(&e(CT_ESTABLISHED, now - 11 * S)),
            now
        ));
        assert!(expired(
            PROTO_TCP,
            &e(CT_CLOSED, now - 11 * S),
            Some(&e(CT_ESTABLISHED, now - 11 * S)),
            now
        ));
    }
}
