//! The packet's control block (`__sk_buff.cb`, five words): what one program hands the
//! program it tail-calls, and nothing else. One message per receiving program; a
//! receiver reads only what its own sender wrote in the same run (a slot another
//! message used before may hold anything). Nothing outside this file indexes `cb`.
//!
//! | slot | `deliver_svc` ([`ToDeliver`]) | `gw_forward` ([`ToForward`]) | `nat_out` ([`ToNatOut`]) |
//! |---|---|---|---|
//! | 0 | the port to deliver into | the port the packet came by | the port the packet came by |
//! | 1 | that port's flags | how to take it (`VIA_*`) | the address (`NAPT`: the NATGateway's; `ONE_TO_ONE`: the ElasticIP) |
//! | 2 | | the sender's address as it came | the way out's MTU, `nat_out` to itself ([`put_mtu`]) |
//! | 3 | | the sender side settled ([`put_settled`], every routed packet) | |
//! | 4 | | | the mode (`NAPT`, `ONE_TO_ONE`) |
//!
//! Writers: [`ToDeliver`] by `deliver::to_port` (any program delivering into a port
//! that consumes Services); [`ToForward`] and the settled mark by `gw_route`;
//! [`ToNatOut`] by `gw_forward`. A test run of a tail-called program alone sees zeros
//! (`BPF_PROG_TEST_RUN` gives no control block).
use aya_ebpf::programs::TcContext;

/// `gw_forward` routes the packet by its segment's table.
pub const VIA_ROUTE: u32 = 0;
/// `gw_forward` hands the packet to the Node's stack (a Service's host backend).
pub const VIA_HOST: u32 = 1;
/// `gw_forward` routes the packet by the provider Vpc's table (a provider Pod from
/// another Vpc, SVC-02).
pub const VIA_PROVIDER: u32 = 2;
/// `nat_out` maps the connection to a port of the NATGateway's address (NAT-01).
pub const NAPT: u32 = 0;
/// `nat_out` rewrites the source address alone, to the NIC's ElasticIP (NAT-03).
pub const ONE_TO_ONE: u32 = 1;

const SETTLED: usize = 3;
const MTU: usize = 2;
const NAT_MODE: usize = 4;

/// The control block, for the program's run.
#[inline(always)]
fn words(ctx: &TcContext) -> *mut [u32; 5] {
    // SAFETY: the context pointer is valid for the program's run; cb is scratch space
    // the program owns.
    unsafe { &raw mut (*ctx.skb.skb).cb }
}

/// To `deliver_svc`: the port and its flags.
pub struct ToDeliver {
    pub ifindex: u32,
    pub flags: u32,
}

impl ToDeliver {
    #[inline(always)]
    pub fn put(self, ctx: &TcContext) {
        let cb = words(ctx);
        // SAFETY: see `words`.
        unsafe {
            (*cb)[0] = self.ifindex;
            (*cb)[1] = self.flags;
        }
    }

    #[inline(always)]
    pub fn take(ctx: &TcContext) -> Self {
        let cb = words(ctx);
        // SAFETY: see `words`.
        unsafe {
            Self {
                ifindex: (*cb)[0],
                flags: (*cb)[1],
            }
        }
    }
}

/// To `gw_forward`: the port the packet came by, how to take it, the sender's address
/// as it came (before a Service's translation).
pub struct ToForward {
    pub ifindex: u32,
    pub via: u32,
    pub sender: u32,
}

impl ToForward {
    #[inline(always)]
    pub fn put(self, ctx: &TcContext) {
        let cb = words(ctx);
        // SAFETY: see `words`.
        unsafe {
            (*cb)[0] = self.ifindex;
            (*cb)[1] = self.via;
            (*cb)[2] = self.sender;
        }
    }

    #[inline(always)]
    pub fn take(ctx: &TcContext) -> Self {
        let cb = words(ctx);
        // SAFETY: see `words`.
        unsafe {
            Self {
                ifindex: (*cb)[0],
                via: (*cb)[1],
                sender: (*cb)[2],
            }
        }
    }
}

/// To `nat_out`: the port the packet came by, the address, the mode.
pub struct ToNatOut {
    pub ifindex: u32,
    pub addr: u32,
    pub mode: u32,
}

impl ToNatOut {
    #[inline(always)]
    pub fn put(self, ctx: &TcContext) {
        let cb = words(ctx);
        // SAFETY: see `words`.
        unsafe {
            (*cb)[0] = self.ifindex;
            (*cb)[1] = self.addr;
            (*cb)[NAT_MODE] = self.mode;
        }
    }

    #[inline(always)]
    pub fn take(ctx: &TcContext) -> Self {
        let cb = words(ctx);
        // SAFETY: see `words`.
        unsafe {
            Self {
                ifindex: (*cb)[0],
                addr: (*cb)[1],
                mode: (*cb)[NAT_MODE],
            }
        }
    }

    /// The port alone (for the answer to a refused packet).
    #[inline(always)]
    pub fn ifindex(ctx: &TcContext) -> u32 {
        // SAFETY: see `words`.
        unsafe { (*words(ctx))[0] }
    }
}

/// `gw_route`, for every packet it hands `gw_forward`: whether policy's sender side is
/// settled (so that no earlier value leaks through).
#[inline(always)]
pub fn put_settled(ctx: &TcContext, settled: bool) {
    // SAFETY: see `words`.
    unsafe { (*words(ctx))[SETTLED] = settled as u32 };
}

/// What [`put_settled`] wrote (read only when policy applies).
#[inline(always)]
pub fn settled(ctx: &TcContext) -> bool {
    // SAFETY: see `words`.
    unsafe { (*words(ctx))[SETTLED] != 0 }
}

/// `nat_out`, to itself: the way out's MTU, when the FIB said the packet is too big.
#[inline(always)]
pub fn put_mtu(ctx: &TcContext, mtu: u32) {
    // SAFETY: see `words`.
    unsafe { (*words(ctx))[MTU] = mtu };
}

/// What [`put_mtu`] wrote.
#[inline(always)]
pub fn mtu(ctx: &TcContext) -> u32 {
    // SAFETY: see `words`.
    unsafe { (*words(ctx))[MTU] }
}
