//! ICMP errors of a connection (netfilter's "related"): where the packet an error
//! quotes (`crate::quoted`) has its connection's entry on this side, the error belongs
//! to it and passes as the connection's replies do, whichever rules deny ICMP: path
//! MTU discovery and a refused port keep working through an ingress-deny ACL (L2-20).
//! An error quoting nothing this side holds is judged by the rules as any ICMP.
use aya_ebpf::programs::TcContext;
use juneau_common::ct::CtKey;

use crate::{conntrack, ipv4::Ipv4, quoted};

/// Whether `ip` is an ICMP error quoting a packet of a connection with an entry in
/// `zone`. The quoted packet is one this side's end sent (an error coming back to it)
/// or received (an error it sends about it), so its tuple as quoted is the key of that
/// end's entry.
#[inline(always)]
pub fn related(ctx: &TcContext, ip: &Ipv4, zone: u32) -> bool {
    let Some(q) = quoted::read(ctx, ip) else {
        return false;
    };
    let key = CtKey::new(zone, q.saddr, q.daddr, q.sport, q.dport, q.proto);
    conntrack::lookup(&key).is_some()
}
