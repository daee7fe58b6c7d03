//! NetworkACL and SecurityGroup rule sets in the datapath (POL-01..03). A rule set is
//! one NetworkACL or one SecurityGroup, by the id the controller gives it
//! (`status.aclID` / `status.groupID`, one space). Its rules are compiled per direction
//! into bitmaps, one bit per rule in priority order (bit 0 first):
//!
//! - `jn_pol_peer`, an LPM trie over (slot, direction, peer address): the bits of every
//!   rule whose peer prefixes contain the address (a prefix inserted for each rule's
//!   peer, each value the union of the rules whose prefixes contain it, so the longest
//!   match is exact);
//! - `jn_pol_port`, an LPM trie over (slot, direction, protocol, port): the bits of every
//!   rule whose protocol and ports match (a port range is a handful of prefixes);
//! - the set's header (`jn_pol_set[id]`, which names the slot its trie entries are
//!   keyed by): the rules that match every protocol, the
//!   rules that allow, and whether the direction is open.
//!
//! A packet's matching rules are `peer & (port | any_protocol)`; the first of them
//! decides (`allow` holds the allowing ones; a SecurityGroup's rules all allow, so any
//! match allows); none denies. Two lookups a set whatever its size: rule sets scale with
//! the tries' capacity, not with the program's instructions (the reference stopped at 16
//! entries because its loop over them reached the verifier's limit).
//!
//! The verdict of a connection's first packet is kept in its connection entry
//! (`CtEntry::policy`, with the epoch it was taken under): later packets pay one
//! compare, and a rule change (`jn_pol_epoch` bumped) has each connection re-decided at
//! its next packet, so what the new rules still allow keeps flowing.

/// Rule sets every Node holds (NetworkACLs and SecurityGroups together); id 0 is none.
pub const MAX_RULE_SETS: u32 = 4096;
/// The tries' slots: two per set (see [`PolSet::slot`]).
pub const MAX_SLOTS: u32 = MAX_RULE_SETS * 2;
/// Rules of one direction of a rule set: the bitmaps' width.
pub const RULES_PER_DIRECTION: u32 = 128;
/// Prefixes in each trie, every rule set together.
pub const MAX_PEER_PREFIXES: u32 = 262_144;
pub const MAX_PORT_PREFIXES: u32 = 262_144;

/// Directions, as indexes of [`PolSet::dirs`] and in the tries' keys.
pub const DIR_INGRESS: u8 = 0;
pub const DIR_EGRESS: u8 = 1;

/// Rules of one direction, bit `i` for the rule of rank `i` (lowest priority value
/// first).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleBits {
    pub w: [u64; 2],
}

impl RuleBits {
    pub const fn and(self, o: Self) -> Self {
        Self {
            w: [self.w[0] & o.w[0], self.w[1] & o.w[1]],
        }
    }

    pub const fn or(self, o: Self) -> Self {
        Self {
            w: [self.w[0] | o.w[0], self.w[1] | o.w[1]],
        }
    }

    pub const fn is_empty(self) -> bool {
        self.w[0] == 0 && self.w[1] == 0
    }

    /// Only the first rule of the set (the lowest bit).
    pub const fn first(self) -> Self {
        if self.w[0] != 0 {
            Self {
                w: [self.w[0] & self.w[0].wrapping_neg(), 0],
            }
        } else {
            Self {
                w: [0, self.w[1] & self.w[1].wrapping_neg()],
            }
        }
    }

    /// The rank of the first rule, `None` when empty.
    pub const fn first_rank(self) -> Option<u32> {
        if self.w[0] != 0 {
            Some(self.w[0].trailing_zeros())
        } else if self.w[1] != 0 {
            Some(64 + self.w[1].trailing_zeros())
        } else {
            None
        }
    }

    pub const fn with(mut self, rank: u32) -> Self {
        self.w[(rank / 64) as usize] |= 1 << (rank % 64);
        self
    }
}

/// The direction allows everything (a NetworkACL's omitted direction, a
/// SecurityGroup's omitted egress): no rule is looked at.
pub const DIR_OPEN: u32 = 1;

/// One direction of a rule set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolDirection {
    /// The rules whose action is allow.
    pub allow: RuleBits,
    /// The rules of protocol `all` (no port lookup decides them).
    pub any_protocol: RuleBits,
    /// `DIR_*`.
    pub flags: u32,
    /// Rules in the direction (for the dumps).
    pub rules: u32,
}

/// A NetworkACL.
pub const SET_ACL: u32 = 1;
/// A SecurityGroup.
pub const SET_SG: u32 = 2;

/// Value of `jn_pol_set[id]` (a hash, so that a set's header is replaced whole).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolSet {
    /// `SET_*`; 0: no such set (a reference to it denies).
    pub kind: u32,
    /// The generation of the object the set was compiled from (`status.rulesetVersion`).
    pub version: u32,
    /// The set's entries in the tries are keyed by this slot (`id * 2` or `id * 2 + 1`):
    /// a changed set is written under the other slot, then its header switched to it,
    /// then the old slot's entries removed, so a packet never judges by half a change.
    pub slot: u32,
    pub pad: u32,
    /// By `DIR_*`.
    pub dirs: [PolDirection; 2],
}

/// Data of `jn_pol_peer`'s key: the slot (big-endian), the direction, a zero byte, then
/// the peer address in network order; the prefix length counts 32 bits of the first
/// four bytes plus the peer prefix's.
pub type PeerKey = [u8; 8];
/// Data of `jn_pol_port`'s key: the slot (big-endian), the direction, the protocol, the
/// port (big-endian), two zero bytes; the prefix length counts 32 bits plus the port
/// prefix's (16 for one port, 0 for every port of the protocol).
pub type PortKey = [u8; 8];

/// The fixed part of both keys' prefixes (set, direction and the protocol byte or the
/// zero byte).
pub const KEY_HEAD_BITS: u32 = 32;

pub const fn peer_key(slot: u32, dir: u8, addr_be: [u8; 4]) -> PeerKey {
    [
        (slot >> 8) as u8,
        slot as u8,
        dir,
        0,
        addr_be[0],
        addr_be[1],
        addr_be[2],
        addr_be[3],
    ]
}

pub const fn port_key(slot: u32, dir: u8, proto: u8, port: u16) -> PortKey {
    [
        (slot >> 8) as u8,
        slot as u8,
        dir,
        proto,
        (port >> 8) as u8,
        port as u8,
        0,
        0,
    ]
}

/// Value of `jn_pol_nic`, keyed by the NIC's (VNI, address) as `gw::NbrKey`: the rule
/// sets of its SecurityGroups, 0 for none (at most 2, POL-02), or [`SET_PENDING`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolNic {
    pub groups: [u16; 2],
}

/// A rule set that is named but has no id yet (its object's status is not written):
/// outside `jn_pol_set`, so whatever names it is denied until the id comes.
pub const SET_PENDING: u16 = 0xffff;

/// Counters of one direction of a rule set (`jn_pol_stats[set * 2 + dir]`, per CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolCounters {
    /// Connections the direction allowed (first packets, and re-decisions).
    pub allowed: u64,
    /// Packets it denied by a rule.
    pub denied_by_rule: u64,
    /// Packets it denied because no rule matched.
    pub denied_no_match: u64,
}

/// `CtEntry::policy` bits: the side of the connection decided on this Node allowed it,
/// under `CtEntry::policy_version` (egress) or `CtEntry::policy_in_version` (ingress).
pub const POL_F_EGRESS: u32 = 1;
pub const POL_F_INGRESS: u32 = 2;

const _: () = assert!(core::mem::size_of::<RuleBits>() == 16);
const _: () = assert!(core::mem::size_of::<PolDirection>() == 40);
const _: () = assert!(core::mem::size_of::<PolSet>() == 96);
const _: () = assert!(core::mem::size_of::<PolCounters>() == 24);
const _: () = assert!(core::mem::size_of::<PolNic>() == 4);
