//! L2Network forwarding state: ports, per-segment learning tables, flood lists.
//!
//! A *segment* is one L2Network on one Node. The daemon gives each VNI it serves a local
//! slot (0..[`MAX_SEGMENTS`]); slots index array maps, which the verifier inlines, so the
//! fast path pays for one hash lookup only (the destination MAC).

/// `jn_l2_port` is an array indexed by ifindex. Interfaces with a larger ifindex cannot
/// be ports; the daemon refuses them with an error that says so.
pub const MAX_PORTS: u32 = 65536;
/// Segment slots per Node (L2Networks with at least one port on it).
pub const MAX_SEGMENTS: u32 = 1024;
/// Learned MACs per segment: one preallocated hash table each. A full table learns
/// nothing new until the aging sweep frees room, and never evicts: a tenant that floods
/// source MACs cannot push out the entries of its own segment's other hosts, let alone
/// another segment's (an LRU table evicts under a global lock and cost 1.5 to 1.8 times as much
/// per new MAC: docs/benchmarks-findings.md).
pub const FDB_ENTRIES: u32 = 8192;
/// Local ports per segment that a broadcast reaches (more than the 110 Pods a
/// Kubernetes Node runs by default).
pub const MAX_FLOOD_PORTS: usize = 256;
pub use crate::overlay::MAX_REMOTE_VTEPS;

/// A learned entry is refreshed at most once per this many nanoseconds, so that a busy
/// sender does not write its entry on every frame.
pub const LEARN_REFRESH_NS: u64 = 1_000_000_000;

/// The learning cache of a port is trusted for this many jiffies (0.256 s at HZ=250,
/// 0.64 s at HZ=100), then the table is looked at again. Jiffies, because the verifier
/// inlines `bpf_jiffies64` into one load on 64-bit JITs, while any clock helper is a
/// call: the cache check sits on every frame's path.
pub const LEARN_CACHE_JIFFIES: u64 = 64;

/// Key of a learning table: a MAC padded to 8 bytes. Aligned to 8 so that the
/// datapath builds and compares a key as one 64-bit word instead of byte by byte.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FdbKey {
    pub mac: [u8; 6],
    pub pad: [u8; 2],
}

impl FdbKey {
    pub const fn new(mac: [u8; 6]) -> Self {
        Self { mac, pad: [0; 2] }
    }
}

/// Value of a learning table entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdbEntry {
    /// Local port the MAC was learned on (0 when learned from a remote Node).
    pub ifindex: u32,
    /// Remote VTEP (IPv4 as a host-order u32, as the tunnel key carries it) when learned
    /// from the overlay, else 0.
    pub vtep: u32,
    /// `bpf_ktime_get_coarse_ns()` (CLOCK_MONOTONIC_COARSE) of the last refresh.
    pub last_seen_ns: u64,
    /// `PORT_*` bits of the port, copied at learning time so that delivery needs no
    /// second port lookup.
    pub flags: u32,
    pub pad: u32,
}

/// One member of a flood list.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FloodPort {
    pub ifindex: u32,
    pub flags: u32,
}

/// Value of `jn_l2_flood[segment]`: the local ports of the segment, in the order
/// copies are sent. Only the first `count` entries are meaningful.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloodList {
    pub count: u32,
    pub pad: u32,
    pub ports: [FloodPort; MAX_FLOOD_PORTS],
}

impl Default for FloodList {
    fn default() -> Self {
        Self {
            count: 0,
            pad: 0,
            ports: [FloodPort::default(); MAX_FLOOD_PORTS],
        }
    }
}

// The layouts are part of the kernel ABI of our maps: no implicit padding allowed.
const _: () = assert!(core::mem::size_of::<FdbKey>() == 8);
const _: () = assert!(core::mem::size_of::<FdbEntry>() == 24);
const _: () = assert!(core::mem::size_of::<FloodPort>() == 8);
const _: () = assert!(core::mem::size_of::<FloodList>() == 8 + 8 * MAX_FLOOD_PORTS);
