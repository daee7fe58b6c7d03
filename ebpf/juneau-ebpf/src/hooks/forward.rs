//! `gw_forward`, the Vpc router's second half, entered by a tail call from `gw_route`:
//! the sender's side of policy, then the route, the neighbour and the hop (or, for a
//! backend through the Node's stack, the Service device).
//!
//! ```text
//! cb::ToForward (port, via, sender) -> jn_l2_port, jn_gw_seg, ipv4
//!   -> policy::egress (the segment's ACL if the packet crosses, the NIC's groups)
//!   -> via the host: svc::to_host (the Service device)
//!   -> the route (the segment's table, or the provider Vpc's): connected, endpoint,
//!      unreachable, no Services; via a NATGateway or the internet gateway:
//!      nat::enter / nat::enter_one_to_one -> tail: nat_out
//!   -> TTL, the neighbour (jn_gw_nbr, then jn_gw_snoop), the MTU
//!   -> gw::route::forward: the hop, then the port, the overlay, svc_host or a flood
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason, GwSegment, NbrEntry, NbrKey, PortConfig, RouteEntry,
    gw::{
        ROUTE_CONNECTED, ROUTE_ENDPOINT, ROUTE_INTERNET_GW, ROUTE_NAT_GW, ROUTE_NO_NEXT_HOP,
        ROUTE_NO_SERVICES, ROUTE_UNREACHABLE,
    },
    port::PORT_ROUTED,
};

use crate::{
    cb, gw,
    icmp::{self, IcmpError},
    ipv4, l2, maps, nat, policy, svc,
};

/// The DF bit of the fragment word, as loaded raw (network order in memory).
const DF_RAW: u16 = 0x0040;

#[inline(always)]
pub fn run(ctx: &TcContext) -> Result<i32, DropReason> {
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
        svc::provider_table()?
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
                return gw::route::to_router(ctx, ifindex, port, seg, &ip);
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
                && !nat::one::napt_mapped(ctx, port.vni, &ip)
            {
                return nat::enter_one_to_one(ctx, ifindex, port.public_ip);
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
            return nat::enter(ctx, ifindex, route.nh_ip);
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
    gw::route::forward(
        ctx,
        &route,
        &nbr,
        hop,
        svc::is_provider_segment,
        |slot, vni| l2::flood::flood(ctx, slot, vni, 0, false),
    )
}
