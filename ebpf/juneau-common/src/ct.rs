//! The connection table (`jn_ct`): one table per Node that Services, policy and NAT
//! share (see `docs/connection-table.md`). An entry is one direction of a connection as
//! its packets show it, in the zone of the port it was seen at; a translated connection
//! has two entries, the original direction's and the reply's, each holding what its
//! packets need (the backend to send to; the Service address to restore).
//!
//! The table is a preallocated hash: when it is full a new connection's insert fails
//! (`BPF_NOEXIST`) and the connection is refused and counted (`CT_FULL`); nothing that is
//! established is ever evicted, as an LRU would. Entries expire by protocol state and
//! last sight; the daemon's sweep deletes them (a delete only of an entry still expired
//! when it is read again), never holding anything the datapath waits on.

/// Default size: a Node of 1M connections (`juneau node --conntrack-size` sets it).
pub const DEFAULT_ENTRIES: u32 = 1 << 20;

/// IP protocols the table tracks by ports.
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_SCTP: u8 = 132;
/// ICMP echo: tracked by its identifier (in `sport`, `dport` 0).
pub const PROTO_ICMP: u8 = 1;

/// Key of `jn_ct`: the zone (the VNI of the segment of the port the direction was seen
/// at: Vpcs overlap, segments do not) and the 5-tuple as the packet carries it,
/// addresses and ports in network order. IPv6 gets a key of its own type (and map),
/// never a widened one.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CtKey {
    pub zone: u32,
    pub saddr: u32,
    pub daddr: u32,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    /// Padding, zero. Two scalars rather than `[u8; 3]`: an array's zero initializer
    /// is a `memset`, which the BPF backend makes a call to a byte-by-byte subprogram,
    /// paid by every packet that builds a key.
    pub pad0: u8,
    pub pad1: u16,
}

/// A direction never answered yet (TCP: SYN seen; UDP: nothing back).
pub const CT_NEW: u8 = 0;
/// Both directions seen (TCP: the SYN answered).
pub const CT_ESTABLISHED: u8 = 1;
/// A FIN was seen: the connection is closing.
pub const CT_CLOSING: u8 = 2;
/// An RST was seen, or both FINs: gone after the short timeout.
pub const CT_CLOSED: u8 = 3;

/// The entry is the reply direction of a connection (its packets come back).
pub const CT_F_REPLY: u8 = 1;
/// The connection is to a Service: the original direction's destination is rewritten
/// to `backend`, the reply's source back to `service`.
pub const CT_F_SERVICE: u8 = 2;
/// The connection came by session affinity (statistics only).
pub const CT_F_AFFINITY: u8 = 4;
/// The connection's source is translated too (SVC-02: a backend reached through the
/// Node's stack): the original direction leaves from `nat_ip:nat_port`; the reply
/// comes back to it, in [`ZONE_HOST`], and is given the client back.
pub const CT_F_SNAT: u8 = 8;

/// A Pod reaching itself through a Service (hairpin): its source is translated to
/// [`HAIRPIN_IP`] so that its own reply leaves the Pod (to its gateway) and is given
/// the ClusterIP back, as Cilium does with its loopback address.
pub const CT_F_HAIRPIN: u8 = 16;

/// The connection leaves the Vpc through a NATGateway (NAT-01): the original direction
/// (in the client's zone) leaves from `nat_ip:nat_port`; its reply, an entry in
/// [`ZONE_HOST`] keyed by that address and port, holds the client to give back
/// (`nat_ip`, `nat_port`, `nat_zone`). Its own bit: `CT_F_SNAT` marks SVC-02's
/// replies, which the Service device's program takes.
pub const CT_F_NAT: u8 = 32;

/// With `CT_F_SNAT`: the backend is a Pod of the provider Vpc reached from another Vpc
/// (SVC-02), so the translated packet is routed by the provider's table
/// (`SvcHost::provider_vni`) instead of entering the Node's stack; its reply, routed
/// to the Service source address, reaches `svc_host` all the same.
pub const CT_F_PROVIDER: u8 = 64;

/// The source of a hairpin connection as the Pod sees it (169.254.42.1, network order
/// as it sits in packets): link-local, never a Pod's, reached by the Pod's default route.
pub const HAIRPIN_IP: u32 = u32::from_ne_bytes([169, 254, 42, 1]);

/// The zone of what arrives from the Node's own stack (the replies of translated
/// sources): no segment has VNI 0.
pub const ZONE_HOST: u32 = 0;

/// Value of `jn_ct`. The fields of the next features are reserved in place (the NAT
/// mapping; the allow record of NetworkACL and SecurityGroup), so that they add their
/// meaning, not a second table or a layout change.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtEntry {
    /// CLOCK_MONOTONIC_COARSE ns of the last packet of either direction seen here.
    pub last_seen_ns: u64,
    /// `CT_*` state.
    pub state: u8,
    /// `CT_F_*`.
    pub flags: u8,
    /// TCP flags seen in this direction (ORed), for the state and the dumps.
    pub tcp_flags: u8,
    pub pad0: u8,
    /// The Service's id (`jn_svc` value), 0 for none: the reply's lookup and the dumps.
    pub service: u32,
    /// Service: the backend (original direction: rewrite the destination to it).
    pub backend_ip: u32,
    pub backend_port: u16,
    /// Service: the ClusterIP's port (reply direction: the source restored to it).
    pub service_port: u16,
    /// Service: the ClusterIP (reply direction: the source restored to it).
    pub service_ip: u32,
    /// NAT: the address and port the source is translated to (original direction),
    /// or the destination given back (a reply in [`ZONE_HOST`]: the client's).
    pub nat_ip: u32,
    pub nat_port: u16,
    /// NAT, original direction: the second of its cached hop ([`NatHop`]).
    pub pad1: u16,
    /// NAT: a reply in [`ZONE_HOST`]: the zone it is delivered in (the client's VNI).
    pub nat_zone: u32,
    /// Policy: the epoch (`jn_pol_epoch`) the ingress side was allowed under.
    pub policy_in_version: u32,
    /// Policy: the epoch the egress side was allowed under.
    pub policy_version: u32,
    /// Policy: `policy::POL_F_*`, the sides this Node allowed the connection on.
    pub policy: u32,
}

/// The per-CPU working room (`jn_ct_scratch`, not pinned) of the stages that make a
/// new connection's entries: the Services' three and their keys, policy's pair. The
/// router's call chain must stay within the verifier's 512 bytes of stack, so what
/// is big is built here, in place.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtScratch {
    pub entries: [CtEntry; 3],
    pub keys: [CtKey; 2],
}

const _: () = assert!(core::mem::size_of::<CtScratch>() == 208);
const _: () = assert!(core::mem::size_of::<CtKey>() == 20);
const _: () = assert!(core::mem::size_of::<CtEntry>() == 56);

/// Lifetimes by state (ns), Cilium's and the reference's order of magnitude: a TCP
/// connection that goes quiet is kept 6 hours (Cilium's 21,600 s), an unanswered SYN
/// 60 s, a closing one 10 s; UDP and ICMP 60 s after their last packet.
pub mod timeout {
    const S: u64 = 1_000_000_000;
    pub const TCP_ESTABLISHED: u64 = 21_600 * S;
    pub const TCP_NEW: u64 = 60 * S;
    pub const TCP_CLOSING: u64 = 10 * S;
    pub const OTHER: u64 = 60 * S;
}

impl CtKey {
    /// One direction in `zone`, as its packets carry it (network order).
    pub const fn new(zone: u32, saddr: u32, daddr: u32, sport: u16, dport: u16, proto: u8) -> Self {
        Self {
            zone,
            saddr,
            daddr,
            sport,
            dport,
            proto,
            pad0: 0,
            pad1: 0,
        }
    }

    /// The other direction of the same connection, in the same zone: the key its
    /// answers carry.
    pub const fn reversed(&self) -> Self {
        Self::new(
            self.zone, self.daddr, self.saddr, self.dport, self.sport, self.proto,
        )
    }
}

/// A NATGateway connection's way out of the Node, cached by the fast path in its
/// original direction's entry (`nat::fast`), so that an established connection's
/// packets skip the route table's LPM and `bpf_fib_lookup`. It is kept in the Service
/// fields, which that entry never uses (`CT_F_NAT` is never a Service's original
/// direction, and the Service stages test `CT_F_SERVICE`), so the layout stays:
/// `service` the route epoch (low half) and the device's MTU (high half),
/// `backend_ip`/`backend_port` the next hop's MAC, `service_ip`/`service_port` the
/// device's own, `nat_zone` the device, `pad1` the second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatHop {
    /// `jn_gw_epoch` (its low 16 bits) when it was cached: any route or segment change
    /// makes it stale. 16 bits suffice: a hop also serves one second only, and no
    /// daemon makes 65,536 route changes in one.
    pub epoch: u16,
    /// The device's MTU: a longer packet (a GSO one) is looked up in full, which checks
    /// it segment by segment.
    pub mtu: u16,
    /// The monotonic second (`ns >> 30`, truncated) it was cached in: it serves that
    /// second only, so a change of the Node's own routes or neighbours (which the
    /// daemon does not watch) is seen within about one, as a FIB lookup would see it.
    pub second: u16,
    /// The device to redirect to; 0: nothing cached.
    pub ifindex: u32,
    /// The MACs as the frame's words (bytes 0-1, 2-5), destination then source.
    pub dmac: (u16, u32),
    pub smac: (u16, u32),
}

/// The second a [`NatHop`] is stamped with, from `CLOCK_MONOTONIC_COARSE` ns.
#[inline(always)]
pub const fn hop_second(now_ns: u64) -> u16 {
    (now_ns >> 30) as u16
}

impl NatHop {
    /// Whether the hop still serves, at route epoch `epoch` and `now_ns`, a packet of
    /// `len` bytes from its IP header on.
    #[inline(always)]
    pub const fn serves(&self, epoch: u32, now_ns: u64, len: u32) -> bool {
        self.ifindex != 0
            && self.epoch == epoch as u16
            && self.second == hop_second(now_ns)
            && len <= self.mtu as u32
    }
}

impl CtEntry {
    /// The cached way out of a NATGateway connection's original direction.
    #[inline(always)]
    pub const fn nat_hop(&self) -> NatHop {
        NatHop {
            epoch: self.service as u16,
            mtu: (self.service >> 16) as u16,
            second: self.pad1,
            ifindex: self.nat_zone,
            dmac: (self.backend_port, self.backend_ip),
            smac: (self.service_port, self.service_ip),
        }
    }

    /// Caches `hop` (see [`NatHop`]).
    #[inline(always)]
    pub fn set_nat_hop(&mut self, hop: &NatHop) {
        self.service = hop.epoch as u32 | (hop.mtu as u32) << 16;
        self.pad1 = hop.second;
        self.nat_zone = hop.ifindex;
        (self.backend_port, self.backend_ip) = hop.dmac;
        (self.service_port, self.service_ip) = hop.smac;
    }

    /// How long after its last packet this entry expires.
    pub const fn lifetime(&self, proto: u8) -> u64 {
        if proto != PROTO_TCP && proto != PROTO_SCTP {
            return timeout::OTHER;
        }
        match self.state {
            CT_ESTABLISHED => timeout::TCP_ESTABLISHED,
            CT_NEW => timeout::TCP_NEW,
            _ => timeout::TCP_CLOSING,
        }
    }
}

/// The ports of a fragmented datagram, for its later fragments (which carry none): its
/// first fragment's, recorded where a hook reads it, by zone, addresses, IP
/// identifier and protocol (`jn_frag`, an LRU: a datagram's fragments follow each
/// other within milliseconds, and an entry left over is only ever a stale port pair
/// for an identifier that has wrapped). A later fragment that comes before its first
/// finds nothing and is judged as unreadable, as Cilium's fragment tracking does.
pub const FRAG_ENTRIES: u32 = 8192;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragKey {
    pub zone: u32,
    pub saddr: u32,
    pub daddr: u32,
    /// The IP identifier, raw.
    pub id: u16,
    pub proto: u8,
    pub pad: u8,
}

/// A fragmented datagram's ports as its first fragment carried them (raw).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragPorts {
    pub sport: u16,
    pub dport: u16,
}
