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
    /// Broadcast, multicast or unknown unicast on a segment where no other port exists.
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
}

impl DropReason {
    /// Size of `jn_drops`: one slot per reason, with room to add reasons without
    /// changing the map's layout.
    pub const SLOTS: u32 = 16;

    pub const ALL: [DropReason; 13] = [
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
        }
    }
}
