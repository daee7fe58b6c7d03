//! VXLAN encapsulation by the datapath, for known unicast IPv4 frames to another Node.
//!
//! The VXLAN device in external mode costs, per packet, a route lookup (a BPF tunnel key
//! carries no route cache), a metadata dst, the UDP tunnel transmit and the IP output
//! hooks on the way out, and on the way in the Node's IP and UDP receive, a metadata dst
//! allocated and freed through RCU, and a GRO cell hop. A no-encapsulation ceiling run
//! showed those costs to be most of the gap between the device and the bare underlay.
//! Here the headers are written in place (`bpf_skb_adjust_room` with the encapsulation
//! flags, so GSO packets stay GSO, as UDP tunnel packets) and the frame leaves by the
//! underlay NIC through `bpf_redirect_neigh`, which does the FIB and neighbour work.
//!
//! Only IPv4 payloads take this path: `bpf_skb_adjust_room` refuses any other protocol.
//! Everything else (ARP, IPv6, any EtherType, floods) still goes through the device, and
//! the receiving side accepts both.
use core::ffi::c_void;

use aya_ebpf::{
    bindings::{
        BPF_ADJ_ROOM_ENCAP_L2_SHIFT, BPF_F_ADJ_ROOM_ENCAP_L2_ETH, BPF_F_ADJ_ROOM_ENCAP_L3_IPV4,
        BPF_F_ADJ_ROOM_ENCAP_L4_UDP, BPF_F_ADJ_ROOM_FIXED_GSO, bpf_adj_room_mode::BPF_ADJ_ROOM_MAC,
    },
    helpers::{
        bpf_check_mtu, bpf_get_hash_recalc, bpf_get_prandom_u32, bpf_redirect_neigh,
        bpf_skb_adjust_room,
    },
    programs::TcContext,
};
use juneau_common::{
    DropReason, FdbKey, NodeConfig,
    overlay::{VXLAN_OVERHEAD, VXLAN_PORT},
};

use crate::eth::{self, ETH_HLEN, ETH_P_IP, IPPROTO_UDP, load, store};

const TTL: u8 = 64;
/// VXLAN flags word: the I bit (a valid VNI follows).
const VXLAN_FLAGS: u32 = 0x0800_0000;
/// Offsets of the headers written here, from the start of the frame.
const OUTER_IP: usize = ETH_HLEN;
const OUTER_UDP: usize = OUTER_IP + 20;
const VXLAN: usize = OUTER_UDP + 8;
const INNER_ETH: usize = VXLAN + 8;
/// UDP source ports spread flows over the underlay's ECMP paths (the range the kernel
/// VXLAN device uses by default: the ephemeral ports).
const SPORT_MIN: u32 = 32768;
const SPORT_RANGE: u32 = 61000 - 32768;

/// Encapsulate the frame for (`vni`, `vtep`) and send it by the underlay. `dst`/`src`
/// are the frame's MACs, copied out before the headers move. `Ok(None)`: the frame is
/// untouched, for the device path to carry: no underlay attached, not IPv4, an 802.1Q
/// tag in skb metadata (written out as it is, it would tag the outer frame; the device
/// puts it back inside the payload), too big for the underlay once encapsulated, or
/// the kernel refused to make room (a GSO type it cannot re-segment as a tunnel
/// packet).
#[inline(always)]
pub fn send(
    ctx: &TcContext,
    node: &NodeConfig,
    vni: u32,
    vtep: u32,
    dst: &FdbKey,
    src: &FdbKey,
) -> Result<Option<i32>, DropReason> {
    let skb = ctx.skb.skb;
    let start = ctx.data();
    // SAFETY: the context pointer is valid for the program's run.
    if !node.own_encap()
        || unsafe { (*skb).vlan_present } != 0
        || start + ETH_HLEN + 2 > ctx.data_end()
    {
        return Ok(None);
    }
    // SAFETY (both loads): bounds checked above.
    if u16::from_be(unsafe { load::<u16>(start + 12) }) != ETH_P_IP {
        return Ok(None);
    }
    // The inner IPv4 header's ECN bits go to the outer header (RFC 6040).
    let ecn = match unsafe { load::<u8>(start + ETH_HLEN + 1) } & 0x3 {
        // CE is not copied out: the outer header says ECT(0), as INET_ECN_encapsulate.
        3 => 2,
        ecn => ecn,
    };
    // Too big for the underlay (or for a 16-bit IPv4 length) once encapsulated: the
    // device path fragments what does not fit (DF clear), so leave it to the device.
    // For a GSO packet the kernel checks its segments without the 50 bytes: the segment
    // MTU must leave room for them (the L2Network default, 1450, does).
    if ctx.len() + VXLAN_OVERHEAD - ETH_HLEN as u32 > 0xffff {
        return Ok(None);
    }
    let mut mtu = 0u32;
    // SAFETY: plain helper call on the program's context.
    if unsafe {
        bpf_check_mtu(
            skb as *mut c_void,
            node.underlay_ifindex,
            &mut mtu,
            VXLAN_OVERHEAD as i32,
            0,
        )
    } != 0
    {
        return Ok(None);
    }
    // SAFETY: plain helper call; TCP sockets set the hash, so this rarely dissects.
    let hash = unsafe { bpf_get_hash_recalc(skb) };
    // DF stays clear (as the device sends it), so the ID must vary for reassembly on a
    // routed underlay; segmentation numbers GSO segments on from it.
    // SAFETY: plain helper call.
    let id = unsafe { bpf_get_prandom_u32() } as u16;
    let sport = SPORT_MIN + ((hash as u64 * SPORT_RANGE as u64) >> 32) as u32;
    let flags = BPF_F_ADJ_ROOM_FIXED_GSO
        | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4
        | BPF_F_ADJ_ROOM_ENCAP_L4_UDP
        | BPF_F_ADJ_ROOM_ENCAP_L2_ETH;
    let flags = flags as u64 | (ETH_HLEN as u64) << BPF_ADJ_ROOM_ENCAP_L2_SHIFT;
    // FIXED_GSO: the segment MTU already leaves room for the 50 bytes, so every GSO
    // segment fits the underlay as it is.
    // SAFETY: plain helper call on the program's context.
    if unsafe { bpf_skb_adjust_room(skb, VXLAN_OVERHEAD as i32, BPF_ADJ_ROOM_MAC, flags) } != 0 {
        return Ok(None);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + INNER_ETH + ETH_HLEN > end {
        return Err(DropReason::EncapFailed);
    }
    let len = ctx.len();
    let ip_len = len - ETH_HLEN as u32;
    let (saddr, daddr) = (node.local_vtep, vtep);
    let tos_ttl_proto = [
        (0x45u16 << 8) | ecn as u16,
        (TTL as u16) << 8 | IPPROTO_UDP as u16,
    ];
    let csum = ip_checksum(&[
        tos_ttl_proto[0],
        ip_len as u16,
        id,
        0,
        tos_ttl_proto[1],
        0,
        (saddr >> 16) as u16,
        saddr as u16,
        (daddr >> 16) as u16,
        daddr as u16,
    ]);
    // SAFETY: every store below is inside [start, start + INNER_ETH + ETH_HLEN), checked.
    unsafe {
        // Outer IPv4: no options, DF clear as the kernel device sends them.
        store::<u16>(start + OUTER_IP, tos_ttl_proto[0].to_be());
        store::<u16>(start + OUTER_IP + 2, (ip_len as u16).to_be());
        store::<u16>(start + OUTER_IP + 4, id.to_be());
        store::<u16>(start + OUTER_IP + 6, 0);
        store::<u16>(start + OUTER_IP + 8, tos_ttl_proto[1].to_be());
        store::<u16>(start + OUTER_IP + 10, csum.to_be());
        store::<u32>(start + OUTER_IP + 12, saddr.to_be());
        store::<u32>(start + OUTER_IP + 16, daddr.to_be());
        // UDP, zero checksum (as in `overlay::set_key`).
        store::<u16>(start + OUTER_UDP, (sport as u16).to_be());
        store::<u16>(start + OUTER_UDP + 2, VXLAN_PORT.to_be());
        store::<u16>(start + OUTER_UDP + 4, ((ip_len - 20) as u16).to_be());
        store::<u16>(start + OUTER_UDP + 6, 0);
        store::<u32>(start + VXLAN, VXLAN_FLAGS.to_be());
        store::<u32>(start + VXLAN + 4, (vni << 8).to_be());
        // The inner Ethernet header, as the frame carried it.
        store::<u64>(start + INNER_ETH, eth::bits(dst));
        store::<u32>(start + INNER_ETH + 6, eth::bits(src) as u32);
        store::<u16>(start + INNER_ETH + 10, (eth::bits(src) >> 32) as u16);
        store::<u16>(start + INNER_ETH + 12, ETH_P_IP.to_be());
    }
    // The outer Ethernet header is replaced by the neighbour's; FIB lookup on the outer
    // destination (no next hop given), so routed underlays work too.
    // SAFETY: plain helper call; a null params pointer asks for the FIB lookup.
    Ok(Some(
        unsafe { bpf_redirect_neigh(node.underlay_ifindex, core::ptr::null_mut(), 0, 0) } as i32,
    ))
}

/// The IPv4 header checksum of ten 16-bit words (host order).
#[inline(always)]
pub fn ip_checksum(words: &[u16; 10]) -> u16 {
    let mut sum: u32 = 0;
    for w in words {
        sum += *w as u32;
    }
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}
