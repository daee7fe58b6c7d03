//! IPv4 to a direct ElasticIP, from any hook: one hop (TTL - 1), the holder's MAC as
//! destination and its network's gateway MAC as source, then its port when the holder
//! is here (the port the entry names, checked, or the segment's pinned entry), else its Node over VXLAN with VNI = networkID (whose decapsulation finds
//! the port by the same pinned entry).
use aya_ebpf::{bindings::TC_ACT_OK, programs::TcContext};
use juneau_common::{
    DropReason, EipEntry, FdbEntry, FdbKey,
    eip::gateway_mac,
    port::{PORT_ACTIVE, PORT_EIP},
};

use crate::{
    deliver::to_port,
    eth::{self, ETH_HLEN, store},
    ipv4, maps, overlay,
};

#[inline(always)]
pub fn to_holder(ctx: &TcContext, entry: &EipEntry, ttl: u8) -> Result<i32, DropReason> {
    if ttl <= 1 {
        // The Node's stack answers with time exceeded.
        return Ok(TC_ACT_OK);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN + 20 > end {
        return Err(DropReason::BadIpHeader);
    }
    let src = FdbKey::new(gateway_mac(entry.vni));
    let dst = entry.pod_mac;
    // SAFETY: inside [start, start + ETH_HLEN + 20), checked above.
    unsafe {
        ipv4::decrement_ttl(start);
        store::<u64>(start, eth::bits(&dst));
        store::<u32>(start + 6, eth::bits(&src) as u32);
        store::<u16>(start + 10, (eth::bits(&src) >> 32) as u16);
    }
    if entry.ifindex != 0
        && let Some(port) = maps::jn_l2_port.get_ptr(entry.ifindex)
    {
        // SAFETY: array values live as long as the map; read once.
        let (flags, own) = unsafe { ((*port).flags, (*port).own_mac) };
        if flags & (PORT_ACTIVE | PORT_EIP) == PORT_ACTIVE | PORT_EIP && own == dst {
            return to_port(ctx, entry.ifindex, flags);
        }
    }
    // SAFETY: copied at once.
    let slot = unsafe { maps::jn_l2_vni.get(entry.vni) }.copied();
    if let Some(fdb) = slot.and_then(|s| maps::jn_l2_fdb.get(s))
        && let Some(found) = fdb.get_ptr(dst)
    {
        // SAFETY: copied out at once.
        let found: FdbEntry = unsafe { *found };
        if found.vtep == 0 && found.ifindex != 0 {
            return to_port(ctx, found.ifindex, found.flags);
        }
    }
    if entry.vtep != 0 && entry.vtep != overlay::local_vtep() {
        return overlay::unicast(ctx, entry.vni, entry.vtep, &eth::Addrs { dst, src });
    }
    Err(DropReason::EipNoHolder)
}
