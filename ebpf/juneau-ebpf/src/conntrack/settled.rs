//! Whether a connection entry the router's Service stage already found settles the
//! sender's side of policy (so `policy::egress` costs no second lookup): shared by
//! the Service stage and the NAT fast path, which both hold the entry.
use juneau_common::ct::{CT_F_REPLY, CT_F_SERVICE, CtEntry, CtKey};
use juneau_common::policy::POL_F_EGRESS;

use crate::{frag, ipv4, maps};

/// Whether the sender's side of a packet is already decided by the connection entry
/// the router's Service stage found for it (`key`: the packet as it came, in the
/// sender's zone, which is the key `policy::egress` would look up): a reply, or an original
/// direction allowed under the current epoch. Then the stage tells `policy::egress` so
/// (`cb::put_settled`) and the packet's sender side costs no second lookup. Whatever
/// else (a Service's own entry, a verdict to take again) is left to `policy::egress`.
/// A fragmented datagram's first fragment is never settled here: `policy::egress` records its
/// ports for the later fragments.
#[inline(always)]
pub fn egress_settled(entry: *mut CtEntry, key: &CtKey, ip: &ipv4::Ipv4, tcp_flags: u8) -> bool {
    if frag::first(ip) {
        return false;
    }
    // SAFETY: a map value pointer, read at once.
    let (flags, bits, version) =
        unsafe { ((*entry).flags, (*entry).policy, (*entry).policy_version) };
    let mine = flags & CT_F_SERVICE == 0;
    if flags & CT_F_REPLY != 0 {
        if mine {
            super::answered(entry, &key.reversed(), key.proto, tcp_flags);
        }
        return true;
    }
    // SAFETY: copied at once; an absent epoch is epoch 0.
    let epoch = maps::jn_pol_epoch.get(0).copied().unwrap_or(0);
    if !mine || bits & POL_F_EGRESS == 0 || version != epoch {
        return false;
    }
    super::seen(entry, key.proto, tcp_flags, false);
    true
}
