//! `nat_out`'s way out (the program is `hooks/nat_out.rs`): a packet routed via a
//! NATGateway, from `gw_forward` (the sender's side of policy done, the TTL checked).
//! The Node's routing table is asked first (a packet with no way out claims no port),
//! then the connection's mapping is found or made, the source rewritten and the hop
//! taken.
//!
//! A new connection's port is claimed by inserting its reply's entry (`ZONE_HOST`,
//! `BPF_NOEXIST`): the client's own port first (so a golden is deterministic and most
//! connections keep theirs), then random ports under `bpf_loop`. [`TRIES`] bounds the
//! search: at 90% occupancy toward one destination a try fails with 0.9, 128 tries
//! with 1.4e-6 (NAT-02 asks for 99.99%; Cilium's 32 would give 3.4%).
use core::ffi::c_void;

use aya_ebpf::{
    bindings::{BPF_FIB_LKUP_RET_FRAG_NEEDED, BPF_FIB_LKUP_RET_NO_NEIGH, BPF_FIB_LKUP_RET_SUCCESS},
    helpers::{bpf_get_prandom_u32, bpf_loop, bpf_redirect},
    programs::TcContext,
};
use juneau_common::{
    DropReason, PortConfig,
    ct::{
        CT_F_NAT, CT_F_REPLY, CT_NEW, CtEntry, CtKey, PROTO_ICMP, PROTO_TCP, PROTO_UDP, ZONE_HOST,
    },
};

use crate::{conntrack, fib, frag, ipv4, maps, xlate};

/// The DF bit of the fragment word, as loaded raw (network order in memory).
const DF_RAW: u16 = 0x0040;

/// Tries of a port (an ICMP identifier) for a new connection, the client's own first.
pub const TRIES: u32 = 128;

/// The way out: the FIB, the mapping found or made, the source rewritten, the hop.
/// A refusal (no way out, no port free, nothing NAPT can map) or a packet too big for
/// the way out is returned for `nat_out`'s hook to answer.
#[inline(always)]
pub fn translate(ctx: &TcContext) -> Result<i32, DropReason> {
    // `nat::enter` wrote the control block.
    let crate::cb::ToNatOut {
        ifindex,
        addr: nat_ip,
        mode,
    } = crate::cb::ToNatOut::take(ctx);
    // SAFETY: array value, copied at once.
    let port: PortConfig = maps::jn_l2_port
        .get(ifindex)
        .copied()
        .ok_or(DropReason::NotAPort)?;
    let zone = port.vni;
    let ip = ipv4::read(ctx)?;
    let one = mode == crate::cb::ONE_TO_ONE;
    let ports = if one {
        // 1:1 reads no ports: every packet of the address is the Pod's.
        crate::l4::Ports::default()
    } else {
        frag::ports(ctx, &ip, zone).ok_or(DropReason::NatUnmappable)?
    };
    let found = fib::lookup(ctx, ifindex, nat_ip, ip.daddr, ip.proto, 0);
    let neigh = found.rc == BPF_FIB_LKUP_RET_NO_NEIGH as i64;
    if found.rc == BPF_FIB_LKUP_RET_FRAG_NEEDED as i64 && ip.frag & DF_RAW != 0 {
        // SAFETY: the union's member the kernel wrote on FRAG_NEEDED.
        crate::cb::put_mtu(ctx, unsafe { found.req.__bindgen_anon_1.mtu_result } as u32);
        return Err(DropReason::FragNeeded);
    }
    if found.rc != BPF_FIB_LKUP_RET_SUCCESS as i64 && !neigh {
        return Err(DropReason::NatNoRoute);
    }
    if one {
        super::one::outbound(ctx, &ip, nat_ip)?;
    } else {
        let key = crate::conntrack::key_of(zone, &ip, &ports);
        let (nat_ip, nat_port) = mapping(&key, nat_ip, ports.tcp_flags, frag::later(&ip))?;
        xlate::source(ctx, &ip, &ports, nat_ip, nat_port)?;
        if ip.proto == PROTO_ICMP && !frag::later(&ip) {
            xlate::icmp_id(ctx, ports.sport, nat_port)?;
        }
    }
    if neigh {
        return fib::via_neighbour(ctx, found.req.ifindex);
    }
    fib::hop(ctx, &found.req)?;
    // SAFETY: plain helper call.
    Ok(unsafe { bpf_redirect(found.req.ifindex, 0) } as i32)
}

/// The connection's source as it leaves: its entry's mapping, or a new one. Policy may
/// have made the entry (it runs first): the mapping is written into it in place.
#[inline(never)]
fn mapping(key: &CtKey, nat_ip: u32, tcp_flags: u8, later: bool) -> Result<(u32, u16), DropReason> {
    let entry = conntrack::lookup(key);
    if let Some(e) = entry {
        // SAFETY: a map value pointer, read at once.
        let (flags, ip, port) = unsafe { ((*e).flags, (*e).nat_ip, (*e).nat_port) };
        if flags & CT_F_NAT != 0 && ip != nat_ip {
            // The Node's address on the network changed (its attachment moved): the
            // old claim goes and the connection is mapped anew from the address the
            // Node answers for now.
            conntrack::forget(&CtKey::new(
                ZONE_HOST, key.daddr, ip, key.dport, port, key.proto,
            ));
            // SAFETY: as above.
            unsafe { (*e).flags &= !CT_F_NAT };
        } else if flags & CT_F_NAT != 0 {
            if conntrack::reopens(e, key.proto, tcp_flags) {
                // A new connection on a closed one's port: the mapping (and its
                // claim) carries on, both directions start again, so the sweep
                // judges the new connection, not the old one's close.
                reopen(e, key, ip, port);
            }
            conntrack::seen(e, key.proto, tcp_flags, false);
            return Ok((ip, port));
        }
        if flags & CT_F_REPLY != 0 {
            // The reply of a connection made toward this Pod: not one NAT opened.
            return Err(DropReason::NatUnmappable);
        }
    }
    // Only a datagram's first fragment opens a mapping.
    if later {
        return Err(DropReason::NatUnmappable);
    }
    let nat_port = claim(key, nat_ip)?;
    if let Some(e) = entry {
        // SAFETY: as above. Another CPU's packet of the same connection may have
        // mapped it meanwhile: its mapping stays and this claim goes, so no claim is
        // left without its connection (the window between this read and the write
        // below remains: two claims then, the later mapping kept, the other claim
        // collected by the sweep once quiet).
        if unsafe { (*e).flags } & CT_F_NAT != 0 {
            forget_claim();
            // SAFETY: as above.
            return Ok(unsafe { ((*e).nat_ip, (*e).nat_port) });
        }
        // SAFETY: as above.
        unsafe {
            (*e).nat_ip = nat_ip;
            (*e).nat_port = nat_port;
            (*e).flags |= CT_F_NAT;
        }
        conntrack::seen(e, key.proto, tcp_flags, false);
        return Ok((nat_ip, nat_port));
    }
    let scratch = maps::jn_ct_scratch
        .get_ptr_mut(0)
        .ok_or(DropReason::CtFull)?;
    // SAFETY: this CPU's scratch value, for this program run alone; `claim` is done
    // with its third entry and second key, this uses the first entry.
    let scratch = unsafe { &mut *scratch };
    let fwd = &mut scratch.entries[0];
    conntrack::clear(fwd);
    fwd.last_seen_ns = conntrack::now();
    fwd.state = CT_NEW;
    fwd.flags = CT_F_NAT;
    fwd.tcp_flags = tcp_flags;
    fwd.nat_ip = nat_ip;
    fwd.nat_port = nat_port;
    match conntrack::claim(key, fwd) {
        Ok(true) => return Ok((nat_ip, nat_port)),
        Ok(false) => {}
        Err(e) => {
            // The table refused the connection: its port goes back at once.
            conntrack::forget(&scratch.keys[1]);
            return Err(e);
        }
    }
    // Another CPU's packet of the connection made it meanwhile: this claim goes.
    conntrack::forget(&scratch.keys[1]);
    match conntrack::lookup(key) {
        // SAFETY: a map value pointer, read at once.
        Some(e) if unsafe { (*e).flags } & CT_F_NAT != 0 => {
            // SAFETY: as above.
            Ok(unsafe { ((*e).nat_ip, (*e).nat_port) })
        }
        _ => Err(DropReason::CtFull),
    }
}

/// Removes the claim [`claim`] just wrote (the scratch's second key).
#[inline(always)]
fn forget_claim() {
    if let Some(scratch) = maps::jn_ct_scratch.get_ptr(0) {
        // SAFETY: this CPU's scratch value, for this program run alone.
        conntrack::forget(unsafe { &(*scratch).keys[1] });
    }
}

/// Both directions of a NAT connection whose tuple a new connection takes: back to new.
#[inline(never)]
fn reopen(e: *mut CtEntry, key: &CtKey, nat_ip: u32, nat_port: u16) {
    // SAFETY: a map value pointer, valid for the program's run.
    unsafe {
        (*e).state = CT_NEW;
        (*e).tcp_flags = 0;
    }
    let claim = CtKey::new(ZONE_HOST, key.daddr, nat_ip, key.dport, nat_port, key.proto);
    if let Some(r) = conntrack::lookup(&claim) {
        // SAFETY: as above.
        unsafe {
            (*r).state = CT_NEW;
            (*r).tcp_flags = 0;
        }
    }
}

/// The state of the claim loop, on the stack of the program (bpf_loop hands the
/// callback a pointer to it).
#[repr(C)]
struct Claim {
    key: *mut CtKey,
    entry: *const CtEntry,
    /// The first port a random try may take, and how many there are.
    low: u32,
    span: u32,
    /// 1: claimed (the port in `key.dport`); 2: the table refused (full).
    done: u32,
    pad: u32,
}

/// A port of `nat_ip` nobody holds toward the connection's server: its reply's entry
/// written (the client to give back), in the scratch's second key and third entry.
#[inline(always)]
fn claim(key: &CtKey, nat_ip: u32) -> Result<u16, DropReason> {
    let scratch = maps::jn_ct_scratch
        .get_ptr_mut(0)
        .ok_or(DropReason::CtFull)?;
    // SAFETY: this CPU's scratch value, for this program run alone.
    let scratch = unsafe { &mut *scratch };
    let rev = &mut scratch.entries[2];
    conntrack::clear(rev);
    rev.last_seen_ns = conntrack::now();
    rev.state = CT_NEW;
    rev.flags = CT_F_REPLY | CT_F_NAT;
    rev.nat_ip = key.saddr;
    rev.nat_port = key.sport;
    rev.nat_zone = key.zone;
    let rev_key = &mut scratch.keys[1];
    *rev_key = CtKey::new(
        ZONE_HOST, key.daddr, nat_ip, key.dport, key.sport, key.proto,
    );
    // TCP and UDP: the unprivileged ports; an echo identifier: any; anything else
    // (SCTP, whose checksum covers its ports) keeps its own.
    let (low, span, tries) = match key.proto {
        PROTO_TCP | PROTO_UDP => (1024, 65536 - 1024, TRIES),
        PROTO_ICMP => (0, 65536, TRIES),
        _ => (0, 1, 1),
    };
    let mut state = Claim {
        key: rev_key as *mut CtKey,
        entry: rev as *const CtEntry,
        low,
        span,
        done: 0,
        pad: 0,
    };
    // SAFETY: the scratch value outlives the program's run; the callback matches
    // bpf_loop's signature and touches only what `state` points to.
    unsafe {
        bpf_loop(
            tries,
            one as *mut c_void,
            (&mut state as *mut Claim).cast(),
            0,
        );
    }
    match state.done {
        // SAFETY: as above.
        1 => Ok(unsafe { (*state.key).dport }),
        2 => Err(DropReason::CtFull),
        _ => Err(DropReason::NatPortExhausted),
    }
}

extern "C" fn one(index: u32, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the pointer given above.
    let state = unsafe { &mut *(ctx as *mut Claim) };
    if index > 0 {
        // SAFETY: a plain helper call.
        let r = unsafe { bpf_get_prandom_u32() };
        let span = state.span.max(1);
        let p = state.low + r % span;
        // SAFETY: `key` points into this CPU's scratch value.
        unsafe { (*state.key).dport = (p as u16).to_be() };
    }
    // SAFETY: both point into this CPU's scratch value.
    let (key, entry) = unsafe { (&*state.key, &*state.entry) };
    match conntrack::claim(key, entry) {
        Ok(true) => {
            state.done = 1;
            1
        }
        Ok(false) => 0,
        Err(_) => {
            state.done = 2;
            1
        }
    }
}
