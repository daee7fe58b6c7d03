//! Named drop reasons. Every frame the datapath discards is counted under exactly one
//! of these, in the per-CPU array `jn_drops`, so that "why did my frame vanish" has an
//! answer in `kubectl juneau bpf dump jn_drops`.

/// Why a frame (or one copy of it) was not delivered. The discriminant is the index
/// in `jn_drops`. (One slot, [`DropReason::LearnFailed`], counts an event that does not
/// drop the frame.)
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The frame arrived on an interface that has no active port entry: the program is
    /// attached but the daemon removed (or never wrote) its configuration.
    NotAPort = 0,
    /// The port's segment slot holds no forwarding table.
    NoSegment = 1,
    /// Shorter than an Ethernet header.
    ShortFrame = 2,
    /// The destination MAC was learned behind the port the frame came in on: sending it
    /// back would loop it to its sender (hairpin).
    Hairpin = 3,
    /// Broadcast, multicast or unknown unicast on a segment where no other port exists
    /// (routed ports, a Subnet's, take no flooded frame).
    NoOtherPort = 4,
    /// `bpf_clone_redirect` refused one copy of a flooded frame.
    CloneFailed = 5,
    /// A frame larger than the segment MTU that cannot be fragmented.
    TooBig = 6,
    /// The learning table refused an update (the segment's table is full, or a kernel
    /// error). Not a drop: the frame is forwarded all the same; the slot counts how
    /// often learning failed (`juneau_learn_failures_total`).
    LearnFailed = 7,
    /// A frame from the overlay without a readable tunnel key.
    NoTunnelKey = 8,
    /// A frame from the overlay for a VNI this Node has no port on.
    UnknownVni = 9,
    /// The destination was learned behind a remote VTEP but this Node's overlay is not
    /// attached, or setting the tunnel key failed.
    NoOverlay = 10,
    /// Room was made for the VXLAN headers of a frame the datapath encapsulates, but
    /// they are not in its linear data; the frame has changed, so it cannot fall back
    /// to the VXLAN device. (A refusal to make room falls back instead.)
    EncapFailed = 11,
    /// The VXLAN headers of a received frame were removed, but the inner Ethernet
    /// header is not in its linear data. (A refusal to remove them passes the frame to
    /// the VXLAN device instead.)
    DecapFailed = 12,
    /// A frame sent to a gateway MAC that the router cannot route: not IPv4, or a
    /// source or destination no router forwards (broadcast, multicast, loopback, 0/8).
    NotRoutable = 13,
    /// An IPv4 header the router cannot trust: a version other than 4, a header shorter
    /// than 20 bytes, or a total length longer than the frame.
    BadIpHeader = 14,
    /// No route of the segment's RouteTable covers the destination.
    NoRoute = 15,
    /// The route's kind is not built yet (natGateway, internetGateway, peering, ...).
    RouteUnsupported = 16,
    /// No neighbour is known for the destination address: the router never sends ARP
    /// (L2-18); the address was not handed out by Juneau.
    NoNeighbour = 17,
    /// TTL 1 or 0 at the router (answered with ICMP time exceeded when the rate
    /// limit allows).
    TtlExceeded = 18,
    /// A workload sent a frame with its segment's gateway MAC as source: it would
    /// capture the segment's exit.
    SpoofedGatewayMac = 19,
    /// A packet for a gateway address that the router does not answer (only ICMP echo
    /// is).
    NotForRouter = 20,
    /// Larger than the destination segment's MTU with DF set (answered with ICMP
    /// fragmentation needed when the rate limit allows).
    FragNeeded = 21,
    /// The router program could not be entered (its slot in `jn_gw_progs` is empty).
    NoRouter = 22,
    /// A frame from a Subnet NIC (a routed port) whose source MAC, source IPv4 address
    /// or ARP sender is not the NIC's own: a Pod may not speak for another.
    SourceGuard = 23,
    /// A frame from a Subnet NIC that is neither IPv4 nor ARP: a Subnet carries IPv4
    /// only (pure L2 is what an L2Network is for).
    NotIpv4OnSubnet = 24,
    /// The route's next hop is an endpoint that does not exist (yet), has no address,
    /// or is not in the Vpc of the table.
    NoNextHop = 25,
    /// Not a loss: an ARP packet of a gateway segment this Node has no port of, sent
    /// here only so that the router learns its sender (L2-18 from every Node).
    RouterListened = 26,
    /// From a direct ElasticIP NIC: neither IPv4 nor ARP (EIP-16).
    EipNotIpv4 = 27,
    /// From a direct ElasticIP NIC: ARP other than a request for 169.254.0.1 or a
    /// reply about the NIC's own address (EIP-16).
    ArpFiltered = 28,
    /// IPv4 to a direct ElasticIP whose holder is on no Node this one knows (its
    /// pinned entry gone, its endpoint not yet written).
    EipNoHolder = 29,
}

impl DropReason {
    /// Size of `jn_drops`: one slot per reason, with room to add reasons without
    /// changing the map's layout.
    pub const SLOTS: u32 = 32;

    pub const ALL: [DropReason; 30] = [
        DropReason::NotAPort,
        DropReason::NoSegment,
        DropReason::ShortFrame,
        DropReason::Hairpin,
        DropReason::NoOtherPort,
        DropReason::CloneFailed,
        DropReason::TooBig,
        DropReason::LearnFailed,
        DropReason::NoTunnelKey,
        DropReason::UnknownVni,
        DropReason::NoOverlay,
        DropReason::EncapFailed,
        DropReason::DecapFailed,
        DropReason::NotRoutable,
        DropReason::BadIpHeader,
        DropReason::NoRoute,
        DropReason::RouteUnsupported,
        DropReason::NoNeighbour,
        DropReason::TtlExceeded,
        DropReason::SpoofedGatewayMac,
        DropReason::NotForRouter,
        DropReason::FragNeeded,
        DropReason::NoRouter,
        DropReason::SourceGuard,
        DropReason::NotIpv4OnSubnet,
        DropReason::NoNextHop,
        DropReason::RouterListened,
        DropReason::EipNotIpv4,
        DropReason::ArpFiltered,
        DropReason::EipNoHolder,
    ];

    /// The name shown by the CLI and used in test assertions.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::NotAPort => "NOT_A_PORT",
            DropReason::NoSegment => "NO_SEGMENT",
            DropReason::ShortFrame => "SHORT_FRAME",
            DropReason::Hairpin => "HAIRPIN",
            DropReason::NoOtherPort => "NO_OTHER_PORT",
            DropReason::CloneFailed => "CLONE_FAILED",
            DropReason::TooBig => "TOO_BIG",
            DropReason::LearnFailed => "LEARN_FAILED",
            DropReason::NoTunnelKey => "NO_TUNNEL_KEY",
            DropReason::UnknownVni => "UNKNOWN_VNI",
            DropReason::NoOverlay => "NO_OVERLAY",
            DropReason::EncapFailed => "ENCAP_FAILED",
            DropReason::DecapFailed => "DECAP_FAILED",
            DropReason::NotRoutable => "NOT_ROUTABLE",
            DropReason::BadIpHeader => "BAD_IP_HEADER",
            DropReason::NoRoute => "NO_ROUTE",
            DropReason::RouteUnsupported => "ROUTE_UNSUPPORTED",
            DropReason::NoNeighbour => "NO_NEIGHBOUR",
            DropReason::TtlExceeded => "TTL_EXCEEDED",
            DropReason::SpoofedGatewayMac => "SPOOFED_GATEWAY_MAC",
            DropReason::NotForRouter => "NOT_FOR_ROUTER",
            DropReason::FragNeeded => "FRAG_NEEDED",
            DropReason::NoRouter => "NO_ROUTER",
            DropReason::SourceGuard => "SOURCE_GUARD",
            DropReason::NotIpv4OnSubnet => "NOT_IPV4_ON_SUBNET",
            DropReason::NoNextHop => "NO_NEXT_HOP",
            DropReason::RouterListened => "ROUTER_LISTENED",
            DropReason::EipNotIpv4 => "EIP_NOT_IPV4",
            DropReason::ArpFiltered => "ARP_FILTERED",
            DropReason::EipNoHolder => "EIP_NO_HOLDER",
        }
    }
}
