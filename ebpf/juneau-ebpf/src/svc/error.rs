//! An ICMP error about a packet of a Service connection, delivered to its client: the
//! client sent to the ClusterIP, so the error must quote the ClusterIP and port, not
//! the backend it was translated to, or its socket never learns of it (path MTU
//! discovery through a Service, a refused port). As `nf_nat` does for kube-proxy: the
//! quoted destination and port become the Service's, the quoted header's checksum and
//! a quoted UDP checksum follow, and so does the error's own; the error's source
//! becomes the ClusterIP when the backend itself sent it (a router on the way keeps
//! its address). Everything is computed in registers and stored directly: no helper
//! call, so the packet pointers stay valid.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{CT_F_HAIRPIN, CT_F_REPLY, CT_F_SERVICE, PROTO_SCTP, PROTO_TCP, PROTO_UDP},
};

use crate::{
    conntrack,
    eth::{ETH_HLEN, load, store},
    ipv4::{Ipv4, csum_replace, csum_replace32},
    quoted::{self, END, ICMP_CSUM, INNER, INNER_L4},
};

const IP_CSUM: usize = ETH_HLEN + 10;
const IP_SADDR: usize = ETH_HLEN + 12;

/// `ip` delivered to a port of segment `zone`: when it is an ICMP error quoting a
/// packet its client sent to a Service's backend, it is given the Service back.
#[inline(always)]
pub fn reverse(ctx: &TcContext, zone: u32, ip: &Ipv4) -> Result<(), DropReason> {
    let Some(q) = quoted::read(ctx, ip) else {
        return Ok(());
    };
    // SCTP is translated only where the port stays (its CRC covers no address): the
    // same rewrite, the port written as it is.
    if !matches!(q.proto, PROTO_TCP | PROTO_UDP | PROTO_SCTP) {
        return Ok(());
    }
    // The quoted packet went client -> backend: the connection's reply entry is keyed
    // the other way.
    let Some(entry) = conntrack::lookup(&q.reply_key(zone)) else {
        return Ok(());
    };
    // SAFETY: a map value pointer, read at once.
    let (flags, service_ip, service_port) =
        unsafe { ((*entry).flags, (*entry).service_ip, (*entry).service_port) };
    // A hairpin's client sent from another source; that reply path is its own.
    if flags & (CT_F_SERVICE | CT_F_REPLY | CT_F_HAIRPIN) != CT_F_SERVICE | CT_F_REPLY {
        return Ok(());
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + END > end {
        return Ok(());
    }
    // SAFETY: [start, start + END) is inside the packet, checked above (and by
    // `quoted::read` before it; nothing has changed the packet since).
    unsafe {
        let icmp_csum = load::<u16>(start + ICMP_CSUM);
        // The quoted header's checksum follows its destination; the header still sums
        // to zero, so the error's checksum does not change for it.
        let inner_csum = load::<u16>(start + INNER + 10);
        store::<u16>(
            start + INNER + 10,
            csum_replace32(inner_csum, q.daddr, service_ip),
        );
        store::<u32>(start + INNER + 16, service_ip);
        let mut icmp_csum = csum_replace(icmp_csum, q.dport, service_port);
        store::<u16>(start + INNER_L4 + 2, service_port);
        if q.proto == PROTO_UDP {
            // The quoted UDP checksum covers the pseudo-header's destination and the
            // port; 0 (none) stays 0.
            let old = load::<u16>(start + INNER_L4 + 6);
            if old != 0 {
                let new = csum_replace(
                    csum_replace32(old, q.daddr, service_ip),
                    q.dport,
                    service_port,
                );
                let new = if new == 0 { 0xffff } else { new };
                store::<u16>(start + INNER_L4 + 6, new);
                icmp_csum = csum_replace(icmp_csum, old, new);
            }
        }
        store::<u16>(start + ICMP_CSUM, icmp_csum);
        if ip.saddr == q.daddr {
            let csum = load::<u16>(start + IP_CSUM);
            store::<u16>(start + IP_CSUM, csum_replace32(csum, ip.saddr, service_ip));
            store::<u32>(start + IP_SADDR, service_ip);
        }
    }
    Ok(())
}
