//! `gw_route`, the Vpc router's first half: the ingress program of a Subnet NIC's veth,
//! and entered by a tail call from `port_ingress` on a gateway L2Network's port.
//!
//! ```text
//! port = jn_l2_port[ifindex], its segment's gateway (jn_gw_seg)   NOT_A_PORT, NOT_ROUTABLE
//! a Subnet NIC: no VLAN, its own MAC                        NOT_IPV4_ON_SUBNET, SOURCE_GUARD
//! ARP -> gw::arp (answered for the gateway, learned)
//! IPv4: source guard, martians, to a gateway address -> gw::route::to_router (echo)
//!   -> from the default Subnet to this Node's address -> gw::node::to_stack
//!   -> the Service stage (svc::egress) when the segment's Vpc consumes Services
//!   -> an established NATGateway connection: nat::fast (out from here)
//!   -> cb::ToForward + the settled mark -> tail: gw_forward
//! ```
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason, GwSegment, PortConfig,
    gw::{SEG_PROVIDER, SEG_SERVICES},
    port::{PORT_ACTIVE, PORT_GATEWAY, PORT_ROUTED, PORT_SG},
    tail::TAIL_GW_FORWARD,
};

use crate::{
    arp::ETH_P_ARP,
    cb, conntrack, eth, gw,
    icmp::{self, IcmpError},
    ipv4::{self, martian},
    l2, maps, nat, svc, tail,
};

#[inline(always)]
pub fn run(ctx: &TcContext) -> Result<i32, DropReason> {
    // SAFETY: the context pointer is valid for the program's run.
    let ifindex = unsafe { (*ctx.skb.skb).ingress_ifindex };
    // SAFETY: array value, copied at once.
    let port: PortConfig = unsafe {
        *maps::jn_l2_port
            .get_ptr(ifindex)
            .ok_or(DropReason::NotAPort)?
    };
    // A Subnet NIC's veth runs this program itself (no `port_ingress` before it): a
    // port not (or no longer) written is none.
    if port.flags & PORT_ACTIVE == 0 {
        return Err(DropReason::NotAPort);
    }
    if port.flags & PORT_GATEWAY == 0 {
        return Err(DropReason::NotRoutable);
    }
    // SAFETY: copied at once.
    let seg: GwSegment = unsafe { maps::jn_gw_seg.get(port.vni) }
        .copied()
        .ok_or(DropReason::NotRoutable)?;
    if port.flags & PORT_ROUTED != 0 {
        return from_routed_port(ctx, ifindex, &port, &seg);
    }
    match eth::ethertype(ctx) {
        Some(ETH_P_ARP) => gw::arp::answer(ctx, ifindex, &port, &seg, || {
            l2::forward::switch_from_port(ctx, &port, ifindex)
        }),
        Some(eth::ETH_P_IP) => ipv4(ctx, ifindex, &port, &seg),
        _ => Err(not_ipv4(&port, &seg, DropReason::NotRoutable)),
    }
}

/// Why a frame that is neither IPv4 nor ARP goes no further at the router: policy's
/// own reason where policy applies to the NIC (its segment's NetworkACL, its
/// SecurityGroups: POL-03), so a user reading the drops sees the policy at work.
#[inline(always)]
fn not_ipv4(port: &PortConfig, seg: &GwSegment, otherwise: DropReason) -> DropReason {
    if seg.acl != 0 || port.flags & PORT_SG != 0 {
        DropReason::PolicyEthertype
    } else {
        otherwise
    }
}

/// A Subnet NIC speaks IPv4 and ARP from its own MAC only (its address is checked by
/// each handler).
#[inline(always)]
fn from_routed_port(
    ctx: &TcContext,
    ifindex: u32,
    port: &PortConfig,
    seg: &GwSegment,
) -> Result<i32, DropReason> {
    // A VLAN tag the kernel moved into the skb's metadata: not plain IPv4.
    // SAFETY: the context pointer is valid for the program's run.
    if unsafe { (*ctx.skb.skb).vlan_present } != 0 {
        return Err(not_ipv4(port, seg, DropReason::NotIpv4OnSubnet));
    }
    let addrs = eth::addrs(ctx).ok_or(DropReason::ShortFrame)?;
    if eth::bits(&addrs.src) != eth::bits(&port.own_mac) {
        return Err(DropReason::SourceGuard);
    }
    match eth::ethertype(ctx) {
        Some(ETH_P_ARP) => gw::arp::answer_routed(ctx, ifindex, port, seg),
        Some(eth::ETH_P_IP) => ipv4(ctx, ifindex, port, seg),
        _ => Err(not_ipv4(port, seg, DropReason::NotIpv4OnSubnet)),
    }
}

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
        return gw::route::to_router(ctx, ifindex, port, seg, &ip);
    }
    // A default-Subnet Pod answering its own Node (the kubelet's probes).
    if routed_port && gw::node::is_node(seg, ip.daddr) {
        return gw::node::to_stack(ctx);
    }
    // A ClusterIP: the packet goes on to the connection's backend (SVC-01), when the
    // segment's Vpc consumes Services.
    let services = if seg.flags & SEG_SERVICES != 0 {
        svc::egress(ctx, port.vni, &ip, seg.flags & SEG_PROVIDER == 0)?
    } else {
        svc::Egress::Pass
    };
    // Another stage's connection: an established NATGateway connection leaves from
    // here when it can (`nat::fast`); else its entry may settle the sender's side of
    // policy (`conntrack::egress_settled`), so `policy::egress` looks it up no more.
    let (services, settled) = match services {
        svc::Egress::Connection { entry, ports } if nat::fast::is_nat(entry) => {
            match nat::fast::try_send(ctx, ifindex, port, seg, &ip, &ports, entry)? {
                nat::fast::Fast::Done(verdict) => return Ok(verdict),
                nat::fast::Fast::Slow { settled } => (svc::Egress::Pass, settled),
            }
        }
        svc::Egress::Connection { entry, ports } => {
            let key = conntrack::key_of(port.vni, &ip, &ports);
            let settled = conntrack::egress_settled(entry, &key, &ip, ports.tcp_flags);
            (svc::Egress::Pass, settled)
        }
        other => (other, false),
    };
    cb::put_settled(ctx, settled);
    let via = match services {
        svc::Egress::Pass | svc::Egress::Translated | svc::Egress::Connection { .. } => {
            cb::VIA_ROUTE
        }
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
