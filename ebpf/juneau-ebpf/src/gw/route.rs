//! IPv4 between the segments of a Vpc. Routed once, on the sender's Node: the
//! destination segment's route gives its VNI, gateway MAC and MTU, the neighbour table
//! the destination's MAC and Node; the frame leaves with the destination segment's
//! gateway MAC as source and its VNI on the overlay (one TTL decrement end to end), and
//! the receiving Node only switches it.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason, FdbEntry, GwSegment, NbrEntry, NbrKey, PortConfig, RouteEntry,
    gw::{
        GwStat, ROUTE_CONNECTED, ROUTE_ENDPOINT, ROUTE_INTERNET_GW, ROUTE_NAT_GW,
        ROUTE_NO_NEXT_HOP, ROUTE_NO_SERVICES, ROUTE_UNREACHABLE, SEG_PROVIDER, SEG_SERVICES,
    },
    port::PORT_ROUTED,
    svc::SVC_SOURCE_MAC,
    tail::{TAIL_GW_FORWARD, TAIL_SVC_HOST},
};

use crate::icmp::{self, IcmpError};
use crate::{
    cb,
    deliver::to_port,
    eth::{self, load, store},
    ipv4::{self, Ipv4, martian},
    l2::flood,
    maps, overlay, policy, svc, tail,
};

const IPPROTO_ICMP: u8 = 1;
/// The DF bit of the fragment word, as loaded raw (network order in memory).
const DF_RAW: u16 = 0x0040;

#[inline(always)]
pub fn ipv4(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
) -> Result<i32, DropReason> {
    let ip = ipv4::read(ctx)?;
    let routed_port = port.flags & PORT_ROUTED != 0;
    if routed_port && ip.saddr != port.own_ip {
        return Err(DropReason::SourceGuard);
    }
    if martian(ip.saddr) || martian(ip.daddr) {
        return Err(DropReason::NotRoutable);
    }
    if ip.daddr == seg.gw_ip {
        return to_router(ctx, ifindex, port, seg, &ip);
    }
    // A ClusterIP: the packet goes on to the connection's backend (SVC-01), when the
    // segment's Vpc consumes Services.
    let services = if seg.flags & SEG_SERVICES != 0 {
        svc::egress(ctx, port.vni, &ip, seg.flags & SEG_PROVIDER == 0)?
    } else {
        svc::Egress::Pass
    };
    // An established NATGateway connection leaves from here when it can (`nat::fast`).
    let (services, settled) = match services {
        svc::Egress::Nat { entry, ports } => {
            match crate::nat::fast::try_send(ctx, ifindex, port, seg, &ip, &ports, entry)? {
                crate::nat::fast::Fast::Done(verdict) => return Ok(verdict),
                crate::nat::fast::Fast::Slow { settled } => (svc::Egress::Pass, settled),
            }
        }
        other => {
            let settled = matches!(other, svc::Egress::Settled);
            (other, settled)
        }
    };
    cb::put_settled(ctx, settled);
    let via = match services {
        svc::Egress::Pass
        | svc::Egress::Settled
        | svc::Egress::Translated
        | svc::Egress::Nat { .. } => cb::VIA_ROUTE,
        svc::Egress::Host => cb::VIA_HOST,
        svc::Egress::Provider => cb::VIA_PROVIDER,
        svc::Egress::Reject => {
            let from = ip.daddr;
            return icmp::error(
                ctx,
                ifindex,
                port,
                seg,
                &ip,
                IcmpError::PortUnreachable(from),
            );
        }
    };
    // The rest is its own program (`gw_forward`), verified once: the port in the
    // control block, the packet as the Service stage left it.
    cb::ToForward {
        ifindex,
        via,
        sender: ip.saddr,
    }
    .put(ctx);
    tail::call(ctx, TAIL_GW_FORWARD);
    Err(DropReason::NoRouter)
}

/// `gw_forward`: the sender's side of policy, then the route, the neighbour and the
/// hop (or, for a backend through the Node's stack, the Service device).
#[inline(always)]
pub fn forward_ipv4(ctx: &TcContext) -> Result<i32, DropReason> {
    let cb::ToForward {
        ifindex,
        via,
        sender,
    } = cb::ToForward::take(ctx);
    let host = via == cb::VIA_HOST;
    // SAFETY: array value, copied at once.
    let port: PortConfig = unsafe {
        *maps::jn_l2_port
            .get_ptr(ifindex)
            .ok_or(DropReason::NotAPort)?
    };
    // SAFETY: copied at once.
    let seg: GwSegment = unsafe { maps::jn_gw_seg.get(port.vni) }
        .copied()
        .ok_or(DropReason::NotRoutable)?;
    let (port, seg) = (&port, &seg);
    let ip = ipv4::read(ctx)?;
    let routed_port = port.flags & PORT_ROUTED != 0;
    // The sender's side of policy: its segment's NetworkACL on what crosses the
    // gateway (all a gateway L2Network's port sends the router, what a Subnet sends
    // outside its own prefix or through the Node's stack), its SecurityGroups on all
    // of it. The sender's NIC is the source as it came (a Service's translation may
    // have changed it since).
    let crossing = !routed_port || via != cb::VIA_ROUTE || !seg.contains(ip.daddr);
    let acl = if crossing { seg.acl } else { 0 };
    policy::egress(ctx, port, acl, sender)?;
    if host {
        return svc::to_host(ctx);
    }
    // A provider Pod from another Vpc: the provider's table, where its Subnets are.
    let table_slot = if via == cb::VIA_PROVIDER {
        provider_table()?
    } else {
        seg.table
    };
    let table = maps::jn_gw_rt.get(table_slot).ok_or(DropReason::NoRoute)?;
    let key = aya_ebpf::maps::lpm_trie::Key::new(32, ip.daddr.to_ne_bytes());
    let Some(route): Option<RouteEntry> = table.get(&key).copied() else {
        return icmp::error(ctx, ifindex, port, seg, &ip, IcmpError::NetUnreachable);
    };
    // The address whose neighbour takes the packet: the destination itself on a
    // connected segment, the endpoint on a route via one.
    let next_hop = match route.kind {
        ROUTE_CONNECTED => {
            if ip.daddr == route.gw_ip {
                // Another gateway of the Vpc: the router is that address too.
                return to_router(ctx, ifindex, port, seg, &ip);
            }
            ip.daddr
        }
        ROUTE_ENDPOINT => route.nh_ip,
        ROUTE_NO_NEXT_HOP => return Err(DropReason::NoNextHop),
        ROUTE_UNREACHABLE => {
            return icmp::error(ctx, ifindex, port, seg, &ip, IcmpError::NetUnreachable);
        }
        ROUTE_NO_SERVICES => {
            let refused = IcmpError::Refused(DropReason::SvcNotConsumed);
            return icmp::error(ctx, ifindex, port, seg, &ip, refused);
        }
        // Through a NATGateway, or the internet gateway: 1:1 for a NIC with an
        // ElasticIP attached, else its fallback to the Vpc's NATGateway (NAT-03).
        ROUTE_NAT_GW | ROUTE_INTERNET_GW => {
            if ip.ttl <= 1 {
                return icmp::error(ctx, ifindex, port, seg, &ip, IcmpError::TimeExceeded);
            }
            if route.kind == ROUTE_INTERNET_GW
                && routed_port
                && port.public_ip != 0
                && !crate::nat::one::napt_mapped(ctx, port.vni, &ip)
            {
                return crate::nat::enter_one_to_one(ctx, ifindex, port.public_ip);
            }
            if route.nh_ip == 0 {
                // No address on this Node yet (no NATGateway at all for the internet
                // gateway): refused at once, not timed out.
                let why = if route.kind == ROUTE_NAT_GW {
                    DropReason::NatNoAddress
                } else {
                    DropReason::IgwNoPublicAddress
                };
                return icmp::error(ctx, ifindex, port, seg, &ip, IcmpError::Refused(why));
            }
            return crate::nat::enter(ctx, ifindex, route.nh_ip);
        }
        _ => return Err(DropReason::RouteUnsupported),
    };
    // Within a Subnet a packet is delivered, not routed: no hop, so no TTL spent and
    // the sender's MAC kept, as on the wire of a real subnet.
    let hop = !(routed_port && route.kind == ROUTE_CONNECTED && route.vni == port.vni);
    if hop && ip.ttl <= 1 {
        return icmp::error(ctx, ifindex, port, seg, &ip, IcmpError::TimeExceeded);
    }
    let key = NbrKey {
        vni: route.vni,
        ip: next_hop,
    };
    // Seeded first (what Juneau handed out), then learned from ARP.
    // SAFETY: copied at once (the daemon or the datapath may replace the entry).
    let found = unsafe { maps::jn_gw_nbr.get(key) }
        .or_else(|| unsafe { maps::jn_gw_snoop.get(key) })
        .copied();
    let Some(nbr): Option<NbrEntry> = found else {
        return icmp::error(ctx, ifindex, port, seg, &ip, IcmpError::HostUnreachable);
    };
    // L2-21: what does not fit the destination segment and may not be fragmented is
    // answered with the MTU there (path MTU discovery). GSO packets are cut to the
    // sender's MTU later and are not checked here.
    // SAFETY: the context pointer is valid for the program's run.
    let gso = unsafe { (*ctx.skb.skb).gso_size } != 0;
    if !gso && ip.tot_len > route.mtu && ip.frag & DF_RAW != 0 {
        return icmp::error(
            ctx,
            ifindex,
            port,
            seg,
            &ip,
            IcmpError::FragNeeded(route.mtu),
        );
    }
    forward(ctx, &route, &nbr, hop)
}

/// The table slot of the provider Vpc's `natSourceSubnet` segment (SVC-02).
#[inline(always)]
fn provider_table() -> Result<u32, DropReason> {
    // SAFETY: copied at once.
    let vni = maps::jn_svc_host
        .get(0)
        .map(|h| h.provider_vni)
        .filter(|v| *v != 0)
        .ok_or(DropReason::NoSourceAddress)?;
    // SAFETY: copied at once.
    unsafe { maps::jn_gw_seg.get(vni) }
        .map(|s| s.table)
        .ok_or(DropReason::NoSourceAddress)
}

/// One hop: TTL - 1 (checksum updated), the destination segment's gateway as source,
/// the neighbour as destination, then switched in the destination segment. Without
/// `hop` (within a Subnet) only the destination MAC is written.
#[inline(always)]
fn forward(
    ctx: &TcContext,
    route: &RouteEntry,
    nbr: &NbrEntry,
    hop: bool,
) -> Result<i32, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ipv4::IP_END > end {
        return Err(DropReason::BadIpHeader);
    }
    let dst = nbr.mac;
    // SAFETY: inside [start, start + ipv4::IP_END), checked above.
    let src = unsafe {
        let src = if hop {
            ipv4::decrement_ttl(start);
            juneau_common::FdbKey::new(route.gw_mac)
        } else {
            eth::from_bits(load::<u32>(start + 6) as u64 | (load::<u16>(start + 10) as u64) << 32)
        };
        // The 8-byte store of the destination runs into the source: both written.
        store::<u64>(start, eth::bits(&dst));
        store::<u32>(start + 6, eth::bits(&src) as u32);
        store::<u16>(start + 10, (eth::bits(&src) >> 32) as u16);
        src
    };
    crate::stats::gw(GwStat::Routed);
    let addrs = eth::Addrs { dst, src };
    // The destination segment's table, when this Node has a port on it: the freshest
    // place of the MAC (a Pod here, or where it was last heard).
    // SAFETY: copied at once.
    let slot = unsafe { maps::jn_l2_vni.get(route.vni) }.copied();
    if let Some(slot) = slot
        && let Some(fdb) = maps::jn_l2_fdb.get(slot)
        && let Some(entry) = fdb.get_ptr(dst)
    {
        // SAFETY: copied out at once.
        let entry: FdbEntry = unsafe { *entry };
        if entry.vtep != 0 {
            return overlay::unicast(ctx, route.vni, entry.vtep, &addrs);
        }
        if entry.ifindex != 0 {
            return to_port(ctx, entry.ifindex, entry.flags);
        }
    }
    // Not heard yet: the neighbour's Node, from the endpoint Juneau wrote (L2-18: the
    // first packet reaches a Pod that never spoke).
    let local = overlay::local_vtep();
    if nbr.vtep != 0 && nbr.vtep != local {
        return overlay::unicast(ctx, route.vni, nbr.vtep, &addrs);
    }
    // This Node's Service source address (SVC-02): a provider Pod's reply to a
    // client of another Vpc, given its client back by `svc_host`.
    if eth::bits(&dst) == eth::bits(&juneau_common::FdbKey::new(SVC_SOURCE_MAC)) {
        if !svc::is_provider_segment(route.vni) {
            return Err(DropReason::NotAReply);
        }
        crate::tail::call(ctx, TAIL_SVC_HOST);
        return Err(DropReason::NoDeliveryProgram);
    }
    match slot {
        // Here but silent: every local port of the segment gets it (only its owner
        // takes a frame to its MAC). A Subnet's ports are routed and pinned, never
        // flooded: its neighbour is gone when the table does not have it.
        Some(slot) => flood::flood(ctx, slot, route.vni, 0, false).map_err(|r| {
            if r == DropReason::NoOtherPort {
                DropReason::NoNeighbour
            } else {
                r
            }
        }),
        None => Err(DropReason::NoNeighbour),
    }
}

/// A packet to a gateway address: echo requests are answered, anything else refused.
#[inline(always)]
fn to_router(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
    ip: &Ipv4,
) -> Result<i32, DropReason> {
    if ip.proto != IPPROTO_ICMP {
        return Err(DropReason::NotForRouter);
    }
    icmp::echo_reply(ctx, ifindex, port, seg)
}
