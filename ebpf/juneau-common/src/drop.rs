//! Named drop reasons. Every frame the datapath discards is counted under exactly one
//! of these, in the per-CPU array `jn_drops`, so that "why did my frame vanish" has an
//! answer in `kubectl juneau bpf dump jn_drops`.
//!
//! The enum, its list and its names come from one declaration ([`crate::slots!`]): a
//! reason added there is counted, listed and named everywhere at once.

crate::slots! {
    /// Why a frame (or one copy of it) was not delivered. The discriminant is the index
    /// in `jn_drops`. (One slot, [`DropReason::LearnFailed`], counts an event that does
    /// not drop the frame.) 64 slots: room for the next stages (Services, policy, NAT)
    /// without changing the map's layout.
    pub enum DropReason: 64 {
        /// The frame arrived on an interface that has no active port entry: the program is
        /// attached but the daemon removed (or never wrote) its configuration.
        NotAPort = 0 => "NOT_A_PORT",
        /// The port's segment slot holds no forwarding table.
        NoSegment = 1 => "NO_SEGMENT",
        /// Shorter than an Ethernet header.
        ShortFrame = 2 => "SHORT_FRAME",
        /// The destination MAC was learned behind the port the frame came in on: sending it
        /// back would loop it to its sender (hairpin).
        Hairpin = 3 => "HAIRPIN",
        /// Broadcast, multicast or unknown unicast on a segment where no other port exists
        /// (routed ports, a Subnet's, take no flooded frame).
        NoOtherPort = 4 => "NO_OTHER_PORT",
        /// `bpf_clone_redirect` refused one copy of a flooded frame.
        CloneFailed = 5 => "CLONE_FAILED",
        /// A frame larger than the segment MTU that cannot be fragmented.
        TooBig = 6 => "TOO_BIG",
        /// The learning table refused an update (the segment's table is full, or a kernel
        /// error). Not a drop: the frame is forwarded all the same; the slot counts how
        /// often learning failed (`juneau_learn_failures_total`).
        LearnFailed = 7 => "LEARN_FAILED",
        /// A frame from the overlay without a readable tunnel key.
        NoTunnelKey = 8 => "NO_TUNNEL_KEY",
        /// A frame from the overlay for a VNI this Node has no port on.
        UnknownVni = 9 => "UNKNOWN_VNI",
        /// The destination was learned behind a remote VTEP but this Node's overlay is not
        /// attached, or setting the tunnel key failed.
        NoOverlay = 10 => "NO_OVERLAY",
        /// Room was made for the VXLAN headers of a frame the datapath encapsulates, but
        /// they are not in its linear data; the frame has changed, so it cannot fall back
        /// to the VXLAN device. (A refusal to make room falls back instead.)
        EncapFailed = 11 => "ENCAP_FAILED",
        /// The VXLAN headers of a received frame were removed, but the inner Ethernet
        /// header is not in its linear data. (A refusal to remove them passes the frame to
        /// the VXLAN device instead.)
        DecapFailed = 12 => "DECAP_FAILED",
        /// A frame sent to a gateway MAC that the router cannot route: not IPv4, or a
        /// source or destination no router forwards (broadcast, multicast, loopback, 0/8).
        NotRoutable = 13 => "NOT_ROUTABLE",
        /// An IPv4 header the router cannot trust: a version other than 4, a header shorter
        /// than 20 bytes, or a total length longer than the frame.
        BadIpHeader = 14 => "BAD_IP_HEADER",
        /// No route of the segment's RouteTable covers the destination.
        NoRoute = 15 => "NO_ROUTE",
        /// The route's kind is not built yet (peering, transit, VPN).
        RouteUnsupported = 16 => "ROUTE_UNSUPPORTED",
        /// No neighbour is known for the destination address: the router never sends ARP
        /// (L2-18); the address was not handed out by Juneau.
        NoNeighbour = 17 => "NO_NEIGHBOUR",
        /// TTL 1 or 0 at the router (answered with ICMP time exceeded when the rate
        /// limit allows).
        TtlExceeded = 18 => "TTL_EXCEEDED",
        /// A workload sent a frame with its segment's gateway MAC as source: it would
        /// capture the segment's exit.
        SpoofedGatewayMac = 19 => "SPOOFED_GATEWAY_MAC",
        /// A packet for a gateway address that the router does not answer (only ICMP echo
        /// is).
        NotForRouter = 20 => "NOT_FOR_ROUTER",
        /// Larger than the destination segment's MTU with DF set (answered with ICMP
        /// fragmentation needed when the rate limit allows).
        FragNeeded = 21 => "FRAG_NEEDED",
        /// The router program could not be entered (its slot in `jn_progs` is empty).
        NoRouter = 22 => "NO_ROUTER",
        /// A frame from a Subnet NIC (a routed port) whose source MAC, source IPv4 address
        /// or ARP sender is not the NIC's own: a Pod may not speak for another.
        SourceGuard = 23 => "SOURCE_GUARD",
        /// A frame from a Subnet NIC that is neither IPv4 nor ARP: a Subnet carries IPv4
        /// only (pure L2 is what an L2Network is for).
        NotIpv4OnSubnet = 24 => "NOT_IPV4_ON_SUBNET",
        /// The route's next hop is an endpoint that does not exist (yet), has no address,
        /// or is not in the Vpc of the table.
        NoNextHop = 25 => "NO_NEXT_HOP",
        /// Not a loss: an ARP packet of a gateway segment this Node has no port of, sent
        /// here only so that the router learns its sender (L2-18 from every Node).
        RouterListened = 26 => "ROUTER_LISTENED",
        /// From a direct ElasticIP NIC: neither IPv4 nor ARP (EIP-16).
        EipNotIpv4 = 27 => "EIP_NOT_IPV4",
        /// From a direct ElasticIP NIC: ARP other than a request for 169.254.0.1 or a
        /// reply about the NIC's own address (EIP-16).
        ArpFiltered = 28 => "ARP_FILTERED",
        /// IPv4 to a direct ElasticIP whose holder is on no Node this one knows (its
        /// pinned entry gone, its endpoint not yet written).
        EipNoHolder = 29 => "EIP_NO_HOLDER",
        /// A new connection when the connection table is full: refused (and counted),
        /// never made room for by evicting an established one.
        CtFull = 30 => "CT_FULL",
        /// To a Service without a backend that takes new connections: answered with
        /// ICMP port unreachable (SVC-03).
        SvcNoEndpoints = 31 => "SVC_NO_ENDPOINTS",
        /// A Service's Maglev table or backend entry is missing (a write in progress).
        NoBackend = 32 => "NO_BACKEND",
        /// A Service connection the datapath cannot translate (SCTP to another port).
        SvcUnsupported = 33 => "SVC_UNSUPPORTED",
        /// A rewrite of a translated packet failed.
        NatFailed = 34 => "NAT_FAILED",
        /// The delivery program of Service-consuming ports is missing from `jn_progs`
        /// (a daemon that has not installed it yet).
        NoDeliveryProgram = 35 => "NO_DELIVERY_PROGRAM",
        /// A backend outside every Subnet, while this Node has no Service source
        /// address (SVC-02) or no Service device yet.
        NoSourceAddress = 36 => "NO_SOURCE_ADDRESS",
        /// Every translated source port tried toward that backend is held.
        NoSourcePort = 37 => "NO_SOURCE_PORT",
        /// A reply at the Service device that no connection expects.
        NotAReply = 38 => "NOT_A_REPLY",
        /// Denied by the NetworkACL of the sender's segment (its egress rules).
        PolicyAclEgress = 39 => "POLICY_ACL_EGRESS",
        /// Denied by the sender NIC's SecurityGroups (their egress rules).
        PolicySgEgress = 40 => "POLICY_SG_EGRESS",
        /// Denied by the NetworkACL of the receiver's segment (its ingress rules).
        PolicyAclIngress = 41 => "POLICY_ACL_INGRESS",
        /// Denied by the receiver NIC's SecurityGroups (their ingress rules).
        PolicySgIngress = 42 => "POLICY_SG_INGRESS",
        /// Neither IPv4 nor ARP, to or from a NIC policy applies to (POL-03).
        PolicyEthertype = 43 => "POLICY_ETHERTYPE_DROP",
        /// IPv4 whose ports policy cannot read (a later fragment, a short header), to or
        /// from a NIC policy applies to.
        PolicyL4Unreadable = 44 => "POLICY_L4_UNREADABLE",
        /// A rule set a NIC or segment names is not in `jn_pol_set` (a write in
        /// progress): denied, never let through.
        PolicySetMissing = 45 => "POLICY_SET_MISSING",
        /// A route via a NATGateway on a Node that has no address on its
        /// ExternalNetwork yet (no ExternalNetworkAttachment assigned here).
        NatNoAddress = 46 => "NAT_NO_ADDRESS",
        /// No port (ICMP identifier) of this Node's NAT address is free toward the
        /// destination after every try: the new connection is refused (NAT-02's
        /// exhaustion, a metric and the attachment's condition).
        NatPortExhausted = 47 => "NAT_PORT_EXHAUSTED",
        /// The Node's routing table has no way out for a NATed packet (no route, a
        /// blackhole, forwarding off) or it does not fit the device.
        NatNoRoute = 48 => "NAT_NO_ROUTE",
        /// A packet to a NATGateway whose ports cannot be read (a later fragment whose
        /// first did not come by first, ICMP other than echo, a protocol without
        /// ports): NAPT cannot map it.
        NatUnmappable = 49 => "NAT_UNMAPPABLE",
        /// To an address this Node answers for on an ExternalNetwork, matching no
        /// connection it translated nor an ElasticIP held here: unsolicited from
        /// outside, dropped as a NAT does (the Node's stack would route it back out).
        NatNoMapping = 50 => "NAT_NO_MAPPING",
        /// A new TCP connection whose reply would be taken for a live Service
        /// connection's (a client reusing its port toward a backend it reaches through
        /// a ClusterIP at the same time): refused rather than given the ClusterIP back.
        SvcTupleInUse = 51 => "SVC_TUPLE_IN_USE",
        /// To a ClusterIP from a Vpc that does not consume Services (no
        /// `spec.service.consume`): refused, the client told at once.
        SvcNotConsumed = 52 => "SVC_NOT_CONSUMED",
        /// A route via the Vpc's internet gateway from a NIC without an ElasticIP
        /// attached, in a Vpc whose NATGateway has no address on this Node (or that has
        /// none): refused, the sender told at once (NAT-03).
        IgwNoPublicAddress = 53 => "IGW_NO_PUBLIC_ADDRESS",
        /// 1:1 NAT of an attached ElasticIP cannot translate the packet: an ICMP error
        /// quoting another address, a protocol without ports or echo, or a source
        /// quench or redirect (NAT-03).
        EipNatUnmappable = 54 => "EIP_NAT_UNMAPPABLE",
        /// From outside, to an address of a pool announced by BGP that no NIC holds
        /// and no connection of this Node's expects (EIP-12): dropped here, since the
        /// Node's stack would route it back to the upstream, which sends it here
        /// again until its TTL runs out.
        ExtPoolNoHolder = 55 => "EXT_POOL_NO_HOLDER",
    }
}
