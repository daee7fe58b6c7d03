//! Ethernet header access with the bounds checks the verifier needs.
use aya_ebpf::programs::TcContext;
use juneau_common::FdbKey;

pub const ETH_HLEN: usize = 14;
pub const ETH_P_IP: u16 = 0x0800;
pub const IPPROTO_UDP: u8 = 17;

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
    // SAFETY: bounds checked above; see `load`.
    let (d0, d1, s0, s1) = unsafe {
        (
            load::<u16>(start),
            load::<u32>(start + 2),
            load::<u32>(start + 6),
            load::<u16>(start + 10),
        )
    };
    Some(Addrs {
        dst: from_bits(d0 as u64 | (d1 as u64) << 16),
        src: from_bits(s0 as u64 | (s1 as u64) << 32),
    })
}

/// One packet load of a whole word. `read_unaligned` would make the BPF backend split
/// every load into single bytes (12 loads and 10 shifts for two MACs, on every frame);
/// a typed load is one instruction, and the verifier accepts unaligned packet access
/// on the 64-bit JITs we run on (x86-64, arm64: efficient unaligned access), where the
/// CPU performs it. Ethernet headers also sit at 2 mod 4 behind NET_IP_ALIGN on most
/// architectures, which makes these exact offsets naturally aligned there.
///
/// # Safety
/// `addr..addr + size_of::<T>()` must be inside the packet (checked against data_end).
#[inline(always)]
pub unsafe fn load<T: Copy>(addr: usize) -> T {
    // SAFETY: in bounds per the caller; alignment as above.
    unsafe { core::ptr::read(addr as *const T) }
}

/// One packet store of a whole word (see `load`).
///
/// # Safety
/// `addr..addr + size_of::<T>()` must be inside the packet (checked against data_end).
#[inline(always)]
pub unsafe fn store<T: Copy>(addr: usize, value: T) {
    // SAFETY: in bounds per the caller; alignment as for `load`.
    unsafe { core::ptr::write(addr as *mut T, value) }
}

/// An 8-byte key from a MAC held in the low 48 bits (little endian, as in memory).
#[inline(always)]
pub fn from_bits(bits: u64) -> FdbKey {
    // SAFETY: FdbKey is 8 plain bytes.
    unsafe { core::mem::transmute::<u64, FdbKey>(bits) }
}

/// The EtherType of the frame (the outer one; VLAN tags in skb metadata are not in
/// the data).
#[inline(always)]
pub fn ethertype(ctx: &TcContext) -> Option<u16> {
    let start = ctx.data();
    if start + ETH_HLEN > ctx.data_end() {
        return None;
    }
    // SAFETY: bounds checked above.
    Some(u16::from_be(unsafe { load::<u16>(start + 12) }))
}

/// The range of gateway MACs (`02:4a:4e:..`, see the controller's `gateway_mac`):
/// never learned from the overlay, where routed frames carry them as source.
#[inline(always)]
pub fn is_gateway_range(mac: &FdbKey) -> bool {
    bits(mac) & 0xff_ffff == 0x4e_4a02
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
    let mut et = unsafe { u16::from_be(load::<u16>(start + 12)) };
    if et == 0x8100 || et == 0x88a8 {
        // SAFETY: bounds checked above.
        et = unsafe { u16::from_be(load::<u16>(start + 16)) };
    }
    et == 0x0800 || et == 0x86dd
}
