//! The connection table (`jn_ct`, types in `juneau_common::ct`): lookups, the pair of
//! entries a new translated connection gets, and the state each packet moves. The
//! datapath never deletes: the daemon's sweep collects expired entries.
use juneau_common::{
    DropReason,
    ct::{CT_CLOSED, CT_CLOSING, CT_ESTABLISHED, CtEntry, CtKey, PROTO_TCP},
};

use crate::{
    l4::{TCP_FIN, TCP_RST},
    maps,
};

const BPF_NOEXIST: u64 = 1;

#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: a plain helper call.
    unsafe { aya_ebpf::helpers::bpf_ktime_get_coarse_ns() }
}

/// The entry of one direction, for reading and for [`seen`].
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

/// One packet of the entry's direction: its last sight, its TCP flags, and the state
/// they move it to (FIN: closing, RST: closed). `answered`: a packet of
/// the reply direction, which establishes the connection.
#[inline(always)]
pub fn seen(entry: *mut CtEntry, proto: u8, tcp_flags: u8, answered: bool) {
    // SAFETY: a map value pointer, valid for the program's run; a torn update between
    // CPUs costs at most a state one packet late.
    let e = unsafe { &mut *entry };
    e.last_seen_ns = now();
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
