//! A Service's reply, where it is delivered: its source becomes the ClusterIP again.
use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason,
    ct::{CT_F_REPLY, CT_F_SERVICE, CtKey, PROTO_TCP},
};

use super::error;
use crate::{conntrack, xlate};

/// A packet delivered to a port of segment `zone`: when it is the reply of a Service
/// connection, its source becomes the ClusterIP and port again.
#[inline(always)]
pub fn reverse(ctx: &TcContext, zone: u32) -> Result<(), DropReason> {
    let Ok(ip) = crate::ipv4::read(ctx) else {
        return Ok(());
    };
    let Some(ports) = crate::frag::ports(ctx, &ip, zone) else {
        return error::reverse(ctx, zone, &ip);
    };
    let key = crate::conntrack::key_of(zone, &ip, &ports);
    let Some(entry) = conntrack::lookup(&key) else {
        return Ok(());
    };
    // SAFETY: a map value pointer, read at once.
    let (flags, service_ip, service_port) =
        unsafe { ((*entry).flags, (*entry).service_ip, (*entry).service_port) };
    if flags & (CT_F_SERVICE | CT_F_REPLY) != CT_F_SERVICE | CT_F_REPLY {
        return Ok(());
    }
    let fwd_key = CtKey::new(
        zone,
        ip.daddr,
        service_ip,
        ports.dport,
        service_port,
        ip.proto,
    );
    // A Service flow quiet past its lifetime both ways (an expired UDP flow not yet
    // swept) gives nothing back: what comes now is not its reply. One whose client
    // still sends lives on, however long its server was quiet.
    if ip.proto != PROTO_TCP
        && conntrack::over(entry, ip.proto)
        && conntrack::lookup(&fwd_key).is_none_or(|f| conntrack::over(f, ip.proto))
    {
        return Ok(());
    }
    conntrack::answered(entry, &fwd_key, ip.proto, ports.tcp_flags);
    xlate::source(ctx, &ip, &ports, service_ip, service_port)
}
