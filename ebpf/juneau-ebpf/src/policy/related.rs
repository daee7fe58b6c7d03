//! ICMP errors of a connection (netfilter's "related"): where the packet an error
//! quotes (`crate::quoted`) has its connection's entry on this side, the error belongs
//! to it and passes as the connection's replies do, whichever rules deny ICMP: path
//! MTU discovery and a refused port keep working through an ingress-deny ACL (L2-20).
//! An error quoting nothing this side holds is judged by the rules as any ICMP.
use aya_ebpf::programs::TcContext;

use crate::{conntrack, ipv4::Ipv4, quoted};

/// Whether `ip` is an ICMP error quoting a packet of a connection with an entry in
/// `zone`, sent back to that packet's sender (as netfilter asks: an error addressed
/// elsewhere is no connection's, so a Pod cannot reach past its rules by quoting a
/// tuple it holds). The key is the quoted tuple turned around, as the answer to the
/// quoted packet would come: the reply entry of a connection this side's end opened
/// (the error coming back to it; a Service's reply entry too), or of one it was opened
/// (the error it sends about what it received). Both ends of a connection hold both
/// entries, policy's and a Service's alike.
#[inline(always)]
pub fn related(ctx: &TcContext, ip: &Ipv4, zone: u32) -> bool {
    let Some(q) = quoted::read(ctx, ip) else {
        return false;
    };
    if ip.daddr != q.saddr {
        return false;
    }
    conntrack::lookup(&q.reply_key(zone)).is_some()
}
