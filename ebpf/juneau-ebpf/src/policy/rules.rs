//! One rule set's verdict for one packet (`juneau_common::policy`): the rules whose peer
//! prefixes hold the peer (`jn_pol_peer`), and those whose protocol and ports match
//! (`jn_pol_port`, plus the set's protocol-`all` rules); the first rule of both decides.
use aya_ebpf::maps::lpm_trie::Key;
use juneau_common::{
    DropReason,
    policy::{DIR_OPEN, KEY_HEAD_BITS, PolCounters, PolSet, RuleBits, peer_key, port_key},
};

use crate::maps;

/// Whether set `set` allows the packet in direction `dir`: `peer` the other end
/// (network order), `port` the destination port (host order; 0 for protocols without).
/// A set that is not written (yet) is an error: the packet is denied, never let through.
#[inline(always)]
pub fn allows(set: u32, dir: u8, peer: u32, proto: u8, port: u16) -> Result<bool, DropReason> {
    // SAFETY: copied at once (the daemon replaces entries whole).
    let s: PolSet = unsafe { maps::jn_pol_set.get(set) }
        .copied()
        .ok_or(DropReason::PolicySetMissing)?;
    if s.kind == 0 {
        return Err(DropReason::PolicySetMissing);
    }
    let d = if dir == 0 { s.dirs[0] } else { s.dirs[1] };
    if d.flags & DIR_OPEN != 0 {
        count(set, dir, |c| c.allowed += 1);
        return Ok(true);
    }
    let peer_bits = maps::jn_pol_peer
        .get(&Key::new(
            KEY_HEAD_BITS + 32,
            peer_key(s.slot, dir, peer.to_ne_bytes()),
        ))
        .copied()
        .unwrap_or_default();
    let port_bits = maps::jn_pol_port
        .get(&Key::new(
            KEY_HEAD_BITS + 16,
            port_key(s.slot, dir, proto, port),
        ))
        .copied()
        .unwrap_or_default();
    let matched = peer_bits.and(port_bits.or(d.any_protocol));
    let first: RuleBits = matched.first();
    if !first.and(d.allow).is_empty() {
        count(set, dir, |c| c.allowed += 1);
        return Ok(true);
    }
    if matched.is_empty() {
        count(set, dir, |c| c.denied_no_match += 1);
    } else {
        count(set, dir, |c| c.denied_by_rule += 1);
    }
    Ok(false)
}

#[inline(always)]
fn count(set: u32, dir: u8, f: impl FnOnce(&mut PolCounters)) {
    if let Some(c) = maps::jn_pol_stats.get_ptr_mut(set * 2 + dir as u32) {
        // SAFETY: a per-CPU slot, this CPU's alone.
        f(unsafe { &mut *c });
    }
}
