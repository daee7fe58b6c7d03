//! VXLAN decapsulation by the datapath, on the underlay NIC's ingress: the receiving
//! half of `encap`. A frame for a Pod on this Node (known unicast, IPv4 payload) loses
//! its 50 bytes of headers here and enters the Pod's namespace at once, without the
//! Node's IP and UDP receive, the VXLAN device, its metadata dst and its GRO cell.
//!
//! The hook (`hooks::underlay`) calls [`to_local_port`] with the switch's learning.
//! Anything else passes untouched (`TC_ACT_OK`): underlay traffic that is not VXLAN to
//! this Node, frames with an outer UDP checksum (the stack verifies those) or an outer
//! CE mark, any other payload, broadcasts and unknown destinations (flooded by
//! `overlay_ingress` behind the device), so the two receive paths together see every
//! frame exactly once. GSO packets (TCP bulk data) are decapsulated here only on
//! kernels whose `bpf_skb_adjust_room` knows `BPF_F_ADJ_ROOM_DECAP_L4_UDP` (newer than
//! 6.18); elsewhere they take the device path, which clears their tunnel GSO state.
use aya_ebpf::{
    bindings::{BPF_F_ADJ_ROOM_FIXED_GSO, TC_ACT_OK, bpf_adj_room_mode::BPF_ADJ_ROOM_MAC},
    helpers::bpf_skb_adjust_room,
    programs::TcContext,
};
use juneau_common::{
    DropReason, FdbEntry, FdbKey,
    overlay::{VXLAN_OVERHEAD, VXLAN_PORT},
};

use crate::{
    deliver::to_port,
    eth::{self, ETH_HLEN, ETH_P_IP, IPPROTO_UDP, load, store},
    maps::{self, Fdb},
};

/// `bpf_skb_adjust_room`: clear the UDP-tunnel GSO state on decapsulation (uapi value;
/// the aya bindings predate it).
const BPF_F_ADJ_ROOM_DECAP_L4_UDP: u64 = 1 << 10;
/// The inner frame starts after the 50 bytes of outer headers.
const INNER_ETH: usize = VXLAN_OVERHEAD as usize;

/// The outer IPv4 header's total length fits the frame and covers a whole VXLAN frame,
/// the UDP length fits inside it, and the header checksum is valid.
#[inline(always)]
fn outer_header_sound(ctx: &TcContext, start: usize) -> bool {
    // SAFETY: inside [start, start + INNER_ETH + ETH_HLEN), checked by the caller.
    let (tot_len, udp_len) = unsafe {
        (
            u16::from_be(load::<u16>(start + 16)) as u32,
            u16::from_be(load::<u16>(start + 38)) as u32,
        )
    };
    let ip_room = ctx.len() - ETH_HLEN as u32;
    let least = (INNER_ETH - ETH_HLEN + ETH_HLEN) as u32;
    if tot_len > ip_room || tot_len < least || udp_len > tot_len - 20 || udp_len < least - 20 {
        return false;
    }
    let mut sum: u32 = 0;
    let mut i = 0;
    while i < 10 {
        // SAFETY: the 20 header bytes are inside the checked range.
        sum += u16::from_be(unsafe { load::<u16>(start + ETH_HLEN + 2 * i) }) as u32;
        i += 1;
    }
    // Ten words sum to at most 0x9fff6: two folds bring any carry back in.
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum == 0xffff
}

/// An untagged IPv4 packet to UDP port 4789 of this Node's VTEP (checked fully later);
/// UDP/4789 to anyone else (an ElasticIP's VM being a VTEP itself) is not ours.
#[inline(always)]
pub fn vxlan_like(ctx: &TcContext, local_vtep: u32) -> bool {
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + 38 > end {
        return false;
    }
    // SAFETY: inside [start, start + 38), checked above.
    unsafe {
        u16::from_be(load::<u16>(start + 12)) == ETH_P_IP
            && load::<u8>(start + 14) == 0x45
            && load::<u8>(start + 23) == IPPROTO_UDP
            && u16::from_be(load::<u16>(start + 36)) == VXLAN_PORT
            && u32::from_be(load::<u32>(start + 30)) == local_vtep
    }
}

/// A VXLAN frame for a Pod on this Node (`own_vtep`: its VTEP when the datapath
/// decapsulates itself, else 0), checked as the Node's IP receive would,
/// loses its outer headers and goes to the Pod's port through the delivery stage.
/// `learn` is handed the segment's table, the inner source and the sender's VTEP
/// (the hook passes the switch's learning: this module stays below `l2`). Anything
/// else is left to the stack and the VXLAN device, untouched (`TC_ACT_OK`).
#[inline(always)]
pub fn to_local_port(
    ctx: &TcContext,
    own_vtep: u32,
    learn: impl FnOnce(&Fdb, &FdbKey, u32),
) -> Result<i32, DropReason> {
    let (start, end) = (ctx.data(), ctx.data_end());
    // SAFETY: the context pointer is valid for the program's run.
    if start + INNER_ETH + ETH_HLEN > end || unsafe { (*ctx.skb.skb).vlan_present } != 0 {
        // Short, or an underlay VLAN tag in metadata that must not reach the Pod.
        return Ok(TC_ACT_OK);
    }
    // SAFETY (every load below): inside [start, start + INNER_ETH + ETH_HLEN), checked.
    let (ethertype, ver_ihl, tos, frag, proto, saddr, daddr) = unsafe {
        (
            u16::from_be(load::<u16>(start + 12)),
            load::<u8>(start + 14),
            load::<u8>(start + 15),
            u16::from_be(load::<u16>(start + 20)),
            load::<u8>(start + 23),
            u32::from_be(load::<u32>(start + 26)),
            u32::from_be(load::<u32>(start + 30)),
        )
    };
    // IPv4 without options and not a fragment, UDP. An outer CE mark must reach the
    // inner header (RFC 6040): rare, so the device path does it.
    if ethertype != ETH_P_IP
        || ver_ihl != 0x45
        || frag & 0x3fff != 0
        || proto != IPPROTO_UDP
        || tos & 0x3 == 0x3
    {
        return Ok(TC_ACT_OK);
    }
    // This path skips the Node's IP receive, so it checks what that would: lengths that
    // fit the frame and a valid header checksum. Anything else goes to the stack, which
    // drops it and counts it there.
    if !outer_header_sound(ctx, start) {
        return Ok(TC_ACT_OK);
    }
    if own_vtep == 0 || own_vtep != daddr {
        return Ok(TC_ACT_OK);
    }
    // SAFETY: as above.
    let (dport, udp_csum, vxlan_flags, vni_word, inner_type) = unsafe {
        (
            u16::from_be(load::<u16>(start + 36)),
            load::<u16>(start + 40),
            load::<u8>(start + 42),
            u32::from_be(load::<u32>(start + 46)),
            u16::from_be(load::<u16>(start + INNER_ETH + 12)),
        )
    };
    if dport != VXLAN_PORT || udp_csum != 0 || vxlan_flags != 0x08 || inner_type != ETH_P_IP {
        return Ok(TC_ACT_OK);
    }
    let vni = vni_word >> 8;
    // SAFETY: the value is copied at once.
    let Some(segment) = (unsafe { maps::jn_l2_vni.get(vni) }).copied() else {
        return Ok(TC_ACT_OK);
    };
    // SAFETY: as above.
    let (d0, d1, s0, s1) = unsafe {
        (
            load::<u16>(start + INNER_ETH),
            load::<u32>(start + INNER_ETH + 2),
            load::<u32>(start + INNER_ETH + 6),
            load::<u16>(start + INNER_ETH + 10),
        )
    };
    let dst = eth::from_bits(d0 as u64 | (d1 as u64) << 16);
    let src = eth::from_bits(s0 as u64 | (s1 as u64) << 32);
    if eth::is_group(&dst) {
        return Ok(TC_ACT_OK);
    }
    let Some(fdb) = maps::jn_l2_fdb.get(segment) else {
        return Ok(TC_ACT_OK);
    };
    let entry: FdbEntry = match fdb.get_ptr(dst) {
        // SAFETY: copied out at once; a deleted entry may be reused after this point.
        Some(entry) => unsafe { *entry },
        None => return Ok(TC_ACT_OK),
    };
    if entry.vtep != 0 || entry.ifindex == 0 {
        // Not a local port: the device path floods it locally (split horizon).
        return Ok(TC_ACT_OK);
    }
    learn(fdb, &src, saddr);
    // A GSO packet (unsegmented from a veth underlay, or GRO-merged by a NIC) carries
    // UDP-tunnel GSO state: left on the inner packet it would mislead segmentation or
    // a NIC's tunnel offload if the Pod forwarded it. Only the DECAP_L4_UDP flag
    // (newer than 6.18) makes the helper clear it; a kernel without it refuses the
    // flag, and the frame then takes the device path, which clears it itself.
    let mut flags = BPF_F_ADJ_ROOM_FIXED_GSO as u64;
    // SAFETY: the context pointer is valid for the program's run.
    if unsafe { (*ctx.skb.skb).gso_size } != 0 {
        flags |= BPF_F_ADJ_ROOM_DECAP_L4_UDP;
    }
    // SAFETY: plain helper call on the program's context.
    if unsafe {
        bpf_skb_adjust_room(
            ctx.skb.skb,
            -(VXLAN_OVERHEAD as i32),
            BPF_ADJ_ROOM_MAC,
            flags,
        )
    } != 0
    {
        // Refused before any change (a GSO type it cannot shrink): the device path
        // takes the frame as it is.
        return Ok(TC_ACT_OK);
    }
    // The outer Ethernet header stayed; the inner one takes its place.
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + ETH_HLEN > end {
        return Err(DropReason::DecapFailed);
    }
    // SAFETY: inside [start, start + ETH_HLEN), checked; dst first (its 8-byte store
    // spills into src, written next).
    unsafe {
        store::<u64>(start, eth::bits(&dst));
        store::<u32>(start + 6, s0);
        store::<u16>(start + 10, s1);
    }
    to_port(ctx, entry.ifindex, entry.flags)
}
