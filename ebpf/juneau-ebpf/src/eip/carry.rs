//! IPv4 to an ElasticIP's NIC (a direct holder, or a Subnet NIC it is attached to once
//! 1:1 NAT gave the packet the NIC's address), from any hook: one hop (TTL - 1), the
//! holder's MAC as destination and its network's (or Subnet's) gateway MAC as source,
//! then its port when the holder is here (the port the entry names, checked, or the
//! segment's pinned entry), else its Node over VXLAN with the entry's VNI (whose
//! decapsulation finds the port by the same pinned entry).
use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{
    DropReason, EipEntry, FdbKey, GwSegment,
    eip::gateway_mac,
    port::{PORT_ACL, PORT_ACTIVE, PORT_EIP, PORT_GATEWAY, PORT_ROUTED, PORT_SG},
};

use crate::{
    deliver::{straight, to_port},
    eth, maps, neighbour, overlay,
};

/// To a NIC holding the ElasticIP itself, from its network's gateway MAC.
#[inline(always)]
pub fn to_holder(ctx: &TcContext, entry: &EipEntry, ttl: u8) -> Result<i32, DropReason> {
    carry(ctx, entry, ttl, PORT_EIP)
}

/// To the Subnet NIC an ElasticIP is attached to (NAT-03, the address already the
/// NIC's), from its Subnet's gateway MAC.
#[inline(always)]
pub fn to_attached(ctx: &TcContext, entry: &EipEntry, ttl: u8) -> Result<i32, DropReason> {
    carry(ctx, entry, ttl, PORT_ROUTED)
}

/// One hop to the NIC `entry` names, delivered to its port here when that port is of
/// `kind` (`PORT_EIP`: a direct holder; `PORT_ROUTED`: a Subnet NIC with an ElasticIP
/// attached) with the entry's MAC, else by the segment's pinned entry, else over the
/// overlay with the entry's VNI. The source MAC is the gateway's the NIC sees: its
/// port's own copy when it is here, else the network's (direct) or the Subnet's
/// segment (attached). A local port with neither SecurityGroups nor its segment's
/// NetworkACL is entered straight: nothing of `deliver_svc` acts on an outside packet
/// to it.
#[inline(always)]
fn carry(ctx: &TcContext, entry: &EipEntry, ttl: u8, kind: u32) -> Result<i32, DropReason> {
    if ttl <= 1 {
        // The Node's stack answers with time exceeded.
        return Ok(TC_ACT_OK);
    }
    let dst = entry.pod_mac;
    if entry.ifindex != 0
        && let Some(port) = maps::jn_l2_port.get_ptr(entry.ifindex)
    {
        // SAFETY: array values live as long as the map; read once.
        let (flags, own, gw) = unsafe { ((*port).flags, (*port).own_mac, (*port).gw_mac) };
        // A Subnet port has its gateway's MAC only while the router serves it.
        let need = PORT_ACTIVE | kind | if kind == PORT_ROUTED { PORT_GATEWAY } else { 0 };
        if flags & need == need && own == dst {
            let src = if kind == PORT_EIP {
                FdbKey::new(gateway_mac(entry.vni))
            } else {
                gw
            };
            neighbour::hop(ctx, &dst, &src)?;
            if flags & (PORT_SG | PORT_ACL) == 0 {
                return Ok(straight(entry.ifindex, flags));
            }
            return to_port(ctx, entry.ifindex, flags);
        }
    }
    let src = if kind == PORT_EIP {
        FdbKey::new(gateway_mac(entry.vni))
    } else {
        // SAFETY: copied at once.
        let seg: Option<GwSegment> = unsafe { maps::jn_gw_seg.get(entry.vni) }.copied();
        seg.ok_or(DropReason::EipNoHolder)?.gw_mac
    };
    neighbour::hop(ctx, &dst, &src)?;
    if let Some(found) = neighbour::learned(neighbour::segment_slot(entry.vni), dst)
        && found.vtep == 0
        && found.ifindex != 0
    {
        return to_port(ctx, found.ifindex, found.flags);
    }
    if entry.vtep != 0 && entry.vtep != overlay::local_vtep() {
        return overlay::unicast(ctx, entry.vni, entry.vtep, &eth::Addrs { dst, src });
    }
    Err(DropReason::EipNoHolder)
}
