//! The connection table (`jn_ct`, types in `juneau_common::ct`): lookups, the pair of
//! entries a new translated connection gets, and the state each packet moves. The
//! datapath never deletes: the daemon's sweep collects expired entries.
use juneau_common::{
    DropReason,
    ct::{CT_CLOSED, CT_CLOSING, CT_ESTABLISHED, CT_NEW, CtEntry, CtKey, PROTO_TCP},
};

use crate::{
    l4::{TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN},
    maps,
};

mod settled;

pub use settled::egress_settled;

const BPF_NOEXIST: u64 = 1;
const EEXIST: i32 = 17;

#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: a plain helper call.
    unsafe { aya_ebpf::helpers::bpf_ktime_get_coarse_ns() }
}

/// Zeroes an entry where it lies (the per-CPU scratch): a stage then writes its fields
/// in place, as a struct literal would be built on the stack first. Word by word
/// (`zero::value`): `write_bytes` is a `memset`, a byte loop in a subprogram here.
#[inline(always)]
pub fn clear(entry: &mut CtEntry) {
    crate::zero::value(entry);
}

/// The entry of one direction, for reading and for [`seen`].
/// The key of a packet as it came (`ip`, `ports`), in `zone`.
#[inline(always)]
pub fn key_of(zone: u32, ip: &crate::ipv4::Ipv4, ports: &crate::l4::Ports) -> CtKey {
    CtKey::new(zone, ip.saddr, ip.daddr, ports.sport, ports.dport, ip.proto)
}

#[inline(always)]
pub fn lookup(key: &CtKey) -> Option<*mut CtEntry> {
    maps::jn_ct.get_ptr_mut(key)
}

/// Writes both directions of a new connection, refusing (never evicting) when the
/// table is full: `CT_FULL`. A race with another CPU creating the same connection
/// keeps the first writer's entry (its backend is the one its packets went to).
#[inline(always)]
pub fn create(
    fwd_key: &CtKey,
    fwd: &CtEntry,
    rev_key: &CtKey,
    rev: &CtEntry,
) -> Result<(), DropReason> {
    if maps::jn_ct.insert(fwd_key, fwd, BPF_NOEXIST).is_err() {
        // EEXIST: another CPU's packet of the same connection came first.
        if lookup(fwd_key).is_some() {
            return Ok(());
        }
        return Err(DropReason::CtFull);
    }
    if maps::jn_ct.insert(rev_key, rev, BPF_NOEXIST).is_err() && lookup(rev_key).is_none() {
        // Half a connection is none: the original direction goes again.
        let _ = maps::jn_ct.remove(fwd_key);
        return Err(DropReason::CtFull);
    }
    Ok(())
}

/// Writes one entry unless its key is taken: `Ok(true)` written, `Ok(false)` taken
/// (a translated source port someone else holds), `CT_FULL` when the table is full.
#[inline(always)]
pub fn claim(key: &CtKey, entry: &CtEntry) -> Result<bool, DropReason> {
    match maps::jn_ct.insert(key, entry, BPF_NOEXIST) {
        Ok(()) => Ok(true),
        Err(e) if e == -EEXIST => Ok(false),
        Err(_) => Err(DropReason::CtFull),
    }
}

/// Removes an entry this packet wrote (a connection that could not be made whole).
#[inline(always)]
pub fn forget(key: &CtKey) {
    let _ = maps::jn_ct.remove(key);
}

/// A packet of a reply direction (`entry`): seen as one, and on the first the original
/// direction (`fwd_key`) learns it was answered (its timeout lengthens).
#[inline(always)]
pub fn answered(entry: *mut CtEntry, fwd_key: &CtKey, proto: u8, tcp_flags: u8) {
    // SAFETY: a map value pointer, read at once.
    let first = unsafe { (*entry).state } == CT_NEW;
    seen(entry, proto, tcp_flags, true);
    if first && let Some(fwd) = lookup(fwd_key) {
        seen(fwd, proto, 0, true);
    }
}

/// A TCP SYN (without ACK) on an entry whose connection closed or is closing: a new
/// connection that reuses the tuple (a client's port used again), not a packet of the
/// old one. netfilter does the same for a SYN that meets TIME_WAIT or CLOSE.
#[inline(always)]
pub fn reopens(entry: *const CtEntry, proto: u8, tcp_flags: u8) -> bool {
    // SAFETY: a map value pointer, read at once.
    let state = unsafe { (*entry).state };
    proto == PROTO_TCP
        && tcp_flags & (TCP_SYN | TCP_ACK) == TCP_SYN
        && (state == CT_CLOSED || state == CT_CLOSING)
}

/// The connection of `entry` is over for a new one to take its tuple: closed, closing,
/// or quiet past its lifetime (an expired UDP flow the sweep has not collected yet).
#[inline(always)]
pub fn over(entry: *const CtEntry, proto: u8) -> bool {
    // SAFETY: as above.
    let e = unsafe { &*entry };
    e.state == CT_CLOSED
        || e.state == CT_CLOSING
        || now().saturating_sub(e.last_seen_ns) > e.lifetime(proto)
}

/// One packet of the entry's direction: its last sight, its TCP flags, and the state
/// they move it to (FIN: closing, RST: closed). `answered`: a packet of
/// the reply direction, which establishes the connection.
#[inline(always)]
pub fn seen(entry: *mut CtEntry, proto: u8, tcp_flags: u8, answered: bool) {
    seen_at(entry, proto, tcp_flags, answered, now());
}

/// [`seen`] at `now` (read once by a caller that needs the time too).
#[inline(always)]
pub fn seen_at(entry: *mut CtEntry, proto: u8, tcp_flags: u8, answered: bool, now: u64) {
    // SAFETY: a map value pointer, valid for the program's run; a torn update between
    // CPUs costs at most a state one packet late.
    let e = unsafe { &mut *entry };
    e.last_seen_ns = now;
    if proto == PROTO_TCP {
        e.tcp_flags |= tcp_flags;
        if tcp_flags & TCP_RST != 0 {
            e.state = CT_CLOSED;
        } else if tcp_flags & TCP_FIN != 0 {
            // Closing in this direction; the sweep takes a pair whose both directions
            // closed by the short timeout.
            if e.state != CT_CLOSED {
                e.state = CT_CLOSING;
            }
        } else if answered && e.state < CT_ESTABLISHED {
            e.state = CT_ESTABLISHED;
        }
    } else if answered && e.state < CT_ESTABLISHED {
        e.state = CT_ESTABLISHED;
    }
}
