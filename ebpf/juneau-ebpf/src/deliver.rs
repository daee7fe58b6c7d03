//! The delivery stage: every frame handed to one local port passes here, from every
//! hook and feature, with the packet in hand (`ctx`) and the port it goes to. The one
//! exception today is a flood's copies but the last (`l2/flood.rs` clones them with
//! `bpf_clone_redirect`): broadcast, multicast and unknown unicast, never a routed
//! packet; a stage that must see those too (a receiving NIC's SecurityGroup for ARP)
//! adds a clone variant of this stage there. Routing
//! happens on the sender's Node only, so this is the one place a receiving Node sees
//! a connection's packets in both directions: where the connection table's lookup, the
//! receiving NIC's SecurityGroup and a reply's reverse translation go (the next stages).
//! A Service reply gets its ClusterIP back here (`svc::reverse`), for ports that
//! consume Services (routed and gateway ports: Subnet and gateway-L2Network NICs); a
//! switched port without a gateway never reaches a Service and pays nothing. Then the
//! redirect; a stage that refuses a frame returns its reason.
use aya_ebpf::{
    helpers::{bpf_redirect, bpf_redirect_peer},
    programs::TcContext,
};
use juneau_common::{
    DropReason, FdbEntry, FdbKey, GwSegment, NbrEntry, NbrKey,
    port::{PORT_EIP, PORT_GATEWAY, PORT_PEER, PORT_ROUTED},
};

use juneau_common::tail::TAIL_DELIVER_SVC;

use crate::{eth, maps, tail};

/// Straight into the peer's namespace when the port is a Pod veth (its ingress is
/// entered directly, no veth transmit or backlog hop), else to the port's egress.
/// IPv4 into a port that consumes Services goes by `deliver_svc` (a tail call, with
/// the port in the packet's control block), which gives a reply its ClusterIP back.
#[inline(always)]
pub fn to_port(ctx: &TcContext, ifindex: u32, flags: u32) -> Result<i32, DropReason> {
    if flags & (PORT_ROUTED | PORT_GATEWAY) != 0 && flags & PORT_EIP == 0 && eth::is_ip(ctx) {
        crate::cb::ToDeliver { ifindex, flags }.put(ctx);
        tail::call(ctx, TAIL_DELIVER_SVC);
        return Err(DropReason::NoDeliveryProgram);
    }
    Ok(redirect(ifindex, flags))
}

/// Straight to the port, for a packet no stage of `deliver_svc` acts on (an outside
/// packet, never a Service's reply, to a NIC no policy applies to: NAT-03's way in),
/// and `deliver_svc`'s own last step.
#[inline(always)]
pub fn straight(ifindex: u32, flags: u32) -> i32 {
    redirect(ifindex, flags)
}

#[inline(always)]
fn redirect(ifindex: u32, flags: u32) -> i32 {
    // SAFETY: plain helper calls.
    unsafe {
        if flags & PORT_PEER != 0 {
            bpf_redirect_peer(ifindex, 0) as i32
        } else {
            bpf_redirect(ifindex, 0) as i32
        }
    }
}

/// Where a translated reply goes in when it is given its client back (SVC-02's through
/// the Service device, a NATGateway's from the uplink): the client's MAC (its neighbour
/// entry), its segment's gateway MAC (the source of everything routed to it) and the
/// port the segment's learning table holds the MAC at. The client is on this Node: it
/// sent the original direction here.
pub struct Neighbour {
    pub mac: FdbKey,
    pub gw_mac: FdbKey,
    pub port: FdbEntry,
}

#[inline(always)]
pub fn to_neighbour(zone: u32, addr: u32) -> Result<Neighbour, DropReason> {
    let key = NbrKey {
        vni: zone,
        ip: addr,
    };
    // SAFETY: copied at once.
    let nbr: NbrEntry = unsafe { maps::jn_gw_nbr.get(key) }
        .or_else(|| unsafe { maps::jn_gw_snoop.get(key) })
        .copied()
        .ok_or(DropReason::NoNeighbour)?;
    // SAFETY: copied at once.
    let seg: GwSegment = unsafe { maps::jn_gw_seg.get(zone) }
        .copied()
        .ok_or(DropReason::NoSegment)?;
    // SAFETY: copied at once.
    let slot = unsafe { maps::jn_l2_vni.get(zone) }
        .copied()
        .ok_or(DropReason::NoNeighbour)?;
    let port: FdbEntry = maps::jn_l2_fdb
        .get(slot)
        .and_then(|fdb| fdb.get_ptr(nbr.mac))
        // SAFETY: copied out at once.
        .map(|p| unsafe { *p })
        .ok_or(DropReason::NoNeighbour)?;
    if port.ifindex == 0 {
        return Err(DropReason::NoNeighbour);
    }
    Ok(Neighbour {
        mac: nbr.mac,
        gw_mac: seg.gw_mac,
        port,
    })
}
