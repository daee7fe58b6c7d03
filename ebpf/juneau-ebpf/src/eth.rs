//! Ethernet header access with the bounds checks the verifier needs.
use aya_ebpf::programs::TcContext;
use juneau_common::FdbKey;

pub const ETH_HLEN: usize = 14;

/// The two addresses of a frame, copied out of the packet so that they stay valid after
/// helpers that invalidate packet pointers (`bpf_clone_redirect`).
pub struct Addrs {
    pub dst: FdbKey,
    pub src: FdbKey,
}

#[inline(always)]
pub fn addrs(ctx: &TcContext) -> Option<Addrs> {
    let start = ctx.data();
    if start + ETH_HLEN > ctx.data_end() {
        return None;
    }
    let p = start as *const [u8; 6];
    // SAFETY: bounds checked above; byte arrays have no alignment requirement.
    let (dst, src) = unsafe { (*p, *p.add(1)) };
    Some(Addrs {
        dst: FdbKey::new(dst),
        src: FdbKey::new(src),
    })
}

/// Group bit of the first octet: broadcast and multicast.
#[inline(always)]
pub fn is_group(mac: &FdbKey) -> bool {
    mac.mac[0] & 1 != 0
}

/// The 8-byte key as one integer, to compare MACs without a memcmp.
#[inline(always)]
pub fn bits(mac: &FdbKey) -> u64 {
    // SAFETY: FdbKey is 8 plain bytes.
    unsafe { core::mem::transmute::<FdbKey, u64>(*mac) }
}

/// Whether the frame carries IPv4 or IPv6 (after at most one VLAN tag in the data).
#[inline(always)]
pub fn is_ip(ctx: &TcContext) -> bool {
    let start = ctx.data();
    if start + ETH_HLEN + 4 > ctx.data_end() {
        return false;
    }
    // SAFETY: bounds checked above.
    let mut et = unsafe { u16::from_be(core::ptr::read_unaligned((start + 12) as *const u16)) };
    if et == 0x8100 || et == 0x88a8 {
        et = unsafe { u16::from_be(core::ptr::read_unaligned((start + 16) as *const u16)) };
    }
    et == 0x0800 || et == 0x86dd
}
