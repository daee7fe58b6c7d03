//! NetworkACL and SecurityGroup at the gateway boundary (POL-01..03), on the connection
//! table. Each Node decides the side of a connection it holds: where a packet leaves a
//! local NIC (the router: [`egress`], the sender's segment's NetworkACL if the packet
//! crosses the gateway, then the NIC's SecurityGroups), and where it is delivered to one
//! ([`ingress`], from the delivery program: the receiver's segment's NetworkACL if it
//! came across the gateway, then its SecurityGroups). So the order of POL-03 holds end to
//! end: source ACL egress, source SG egress, destination ACL ingress, destination SG
//! ingress.
//!
//! The verdict is the connection entry's (`CtEntry::policy`, with the epoch it was
//! taken under): the first allowed packet writes the pair (the original direction,
//! and the reply's entry, which every hook lets through: the reply to an allowed
//! connection is never judged by the other direction's rules, L2-20). A Service
//! connection's own entry carries its verdict (the router hands it in). A denial writes
//! nothing, so denied traffic cannot fill the table. When the rules change the daemon
//! bumps the epoch; the next packet of each original direction is judged again.
//!
//! Rule sets are judged by [`rules::allows`], two trie lookups each whatever their size.
//! An ICMP error quoting a connection this side holds passes as the connection's
//! replies do ([`related`]).
mod related;
mod rules;

use aya_ebpf::programs::TcContext;
use juneau_common::{
    DropReason, NbrKey, PortConfig,
    ct::{CT_F_REPLY, CT_F_SERVICE, CT_NEW, PROTO_ICMP, PROTO_SCTP, PROTO_TCP, PROTO_UDP},
    policy::{DIR_EGRESS, DIR_INGRESS, POL_F_EGRESS, POL_F_INGRESS, PolNic},
    port::PORT_SG,
};

use crate::{conntrack, frag, ipv4, l4, maps};

/// One side as the hook knows it: its segment's NetworkACL (0 when the packet does not
/// cross the gateway, or there is none), its port's zone and whether its NIC carries
/// SecurityGroups, and the NIC's address as the packet shows it (the source leaving,
/// the destination arriving). The groups themselves are looked up only when a verdict
/// is taken ([`Side::groups`]): an established connection's packets pay no NIC lookup.
#[derive(Clone, Copy)]
struct Side {
    acl: u32,
    zone: u32,
    sg: bool,
    nic_ip: u32,
}

impl Side {
    #[inline(always)]
    fn of(port: &PortConfig, acl: u32, nic_ip: u32) -> Self {
        Self {
            acl,
            zone: port.vni,
            sg: port.flags & PORT_SG != 0,
            nic_ip,
        }
    }

    /// The NIC's SecurityGroups (none when its port carries none).
    #[inline(always)]
    fn groups(&self) -> Result<[u16; 2], DropReason> {
        if !self.sg {
            return Ok([0; 2]);
        }
        let key = NbrKey {
            vni: self.zone,
            ip: self.nic_ip,
        };
        // SAFETY: copied at once.
        let nic: PolNic = unsafe { maps::jn_pol_nic.get(key) }
            .copied()
            .ok_or(DropReason::PolicySetMissing)?;
        Ok(nic.groups)
    }
}

/// Whether policy applies to a port at all (most ports pay this one compare).
#[inline(always)]
fn open(port: &PortConfig, acl: u32) -> bool {
    acl == 0 && port.flags & PORT_SG == 0
}

/// One direction's constants: which bit and epoch field of the entry, which drops.
struct Hook {
    dir: u8,
    bit: u32,
    acl_drop: DropReason,
    sg_drop: DropReason,
}

const EGRESS: Hook = Hook {
    dir: DIR_EGRESS,
    bit: POL_F_EGRESS,
    acl_drop: DropReason::PolicyAclEgress,
    sg_drop: DropReason::PolicySgEgress,
};

const INGRESS: Hook = Hook {
    dir: DIR_INGRESS,
    bit: POL_F_INGRESS,
    acl_drop: DropReason::PolicyAclIngress,
    sg_drop: DropReason::PolicySgIngress,
};

/// A packet leaving `port` through the router, as it is now (after a Service's
/// translation); `nic_ip`: the sender's address as it came.
#[inline(always)]
pub fn egress(ctx: &TcContext, port: &PortConfig, acl: u32, nic_ip: u32) -> Result<(), DropReason> {
    // The router's first program marked a settled sender side (`cb::put_settled`).
    if open(port, acl) || crate::cb::settled(ctx) {
        return Ok(());
    }
    let mut maybe_reply = false;
    judge(
        ctx,
        &Side::of(port, acl, nic_ip),
        DIR_EGRESS,
        &mut maybe_reply,
    )
}

/// A packet delivered to `port`, as it arrives; `acl`: its segment's NetworkACL when
/// the packet came across the gateway. `Ok(true)`: the packet may be a Service's reply
/// still to translate back (no lookup was made, or the entry found is a Service's
/// reply); `Ok(false)`: the connection's entry in the port's zone was found or made
/// and is policy's, so the Service stage need not look it up again.
#[inline(always)]
pub fn ingress(ctx: &TcContext, port: &PortConfig, acl: u32) -> Result<bool, DropReason> {
    if open(port, acl) {
        return Ok(true);
    }
    let ip = ipv4::read(ctx)?;
    // An out-parameter, not a `Result<bool, _>`: the packed pair leaves the compiler an
    // undefined half it fills from any register, a pointer too, which the verifier
    // refuses.
    let mut maybe_reply = false;
    judge(
        ctx,
        &Side::of(port, acl, ip.daddr),
        DIR_INGRESS,
        &mut maybe_reply,
    )?;
    // An ICMP error's Service entry is keyed by what it quotes, not by its own tuple:
    // `svc::reverse` looks for it (ICMP is rare, the lookup is cheap).
    Ok(maybe_reply || ip.proto == PROTO_ICMP)
}

/// The judgement of one packet on one side. Its own function (a BPF-to-BPF call,
/// five arguments at most): the router's frame holds the Service stage already, and
/// the verifier bounds a call chain's stack to 512 bytes. A new connection's entries
/// are built in a per-CPU scratch value, not on the stack, for the same reason.
#[inline(never)]
fn judge(ctx: &TcContext, side: &Side, dir: u8, maybe_reply: &mut bool) -> Result<(), DropReason> {
    let hook = if dir == DIR_EGRESS { &EGRESS } else { &INGRESS };
    let side = *side;
    let zone = side.zone;
    let ip = ipv4::read(ctx)?;
    let ports = flow(ctx, &ip, zone).ok_or(DropReason::PolicyL4Unreadable)?;
    if related::related(ctx, &ip, zone) {
        return Ok(());
    }
    let key = crate::conntrack::key_of(zone, &ip, &ports);
    let entry = conntrack::lookup(&key);
    // SAFETY: copied at once; an absent epoch is epoch 0.
    let epoch = maps::jn_pol_epoch.get(0).copied().unwrap_or(0);
    if let Some(e) = entry {
        // SAFETY: a map value pointer, read at once.
        let (flags, bits, version) = unsafe {
            (
                (*e).flags,
                (*e).policy,
                if hook.dir == DIR_EGRESS {
                    (*e).policy_version
                } else {
                    (*e).policy_in_version
                },
            )
        };
        // A Service's entry is kept by the Service stage; policy keeps its own.
        let mine = flags & CT_F_SERVICE == 0;
        if flags & CT_F_REPLY != 0 {
            // The reply of a connection a hook of this Node allowed.
            if mine {
                conntrack::answered(e, &key.reversed(), ip.proto, ports.tcp_flags);
            }
            *maybe_reply = !mine;
            return Ok(());
        }
        if bits & hook.bit == 0 || version != epoch {
            decide(side, hook, &ip, &ports)?;
            // SAFETY: as above; a racing CPU writes the same values.
            unsafe {
                (*e).policy |= hook.bit;
                if hook.dir == DIR_EGRESS {
                    (*e).policy_version = epoch;
                } else {
                    (*e).policy_in_version = epoch;
                }
            }
        }
        if mine {
            conntrack::seen(e, ip.proto, ports.tcp_flags, false);
        }
        *maybe_reply = !mine;
        return Ok(());
    }
    decide(side, hook, &ip, &ports)?;
    let scratch = maps::jn_ct_scratch
        .get_ptr_mut(0)
        .ok_or(DropReason::CtFull)?;
    // SAFETY: this CPU's scratch value, for this program run alone (the Service stage
    // is done with it: it made no entry for this packet, or policy would not).
    let [fwd, rev, _] = unsafe { &mut (*scratch).entries };
    conntrack::clear(fwd);
    fwd.last_seen_ns = conntrack::now();
    fwd.state = CT_NEW;
    fwd.tcp_flags = ports.tcp_flags;
    fwd.policy = hook.bit;
    fwd.policy_version = if hook.dir == DIR_EGRESS { epoch } else { 0 };
    fwd.policy_in_version = if hook.dir == DIR_INGRESS { epoch } else { 0 };
    *rev = *fwd;
    rev.flags = CT_F_REPLY;
    rev.tcp_flags = 0;
    conntrack::create(&key, fwd, &key.reversed(), rev)
}

/// The side's rule sets in order: the NetworkACL first (its first matching rule
/// decides), then the SecurityGroups (any of them allowing allows).
#[inline(always)]
fn decide(side: Side, hook: &Hook, ip: &ipv4::Ipv4, ports: &l4::Ports) -> Result<(), DropReason> {
    let (peer, port) = if hook.dir == DIR_EGRESS {
        (ip.daddr, ports.dport)
    } else {
        (ip.saddr, ports.dport)
    };
    let port = u16::from_be(port);
    if side.acl != 0 && !rules::allows(side.acl, hook.dir, peer, ip.proto, port)? {
        return Err(hook.acl_drop);
    }
    let [a, b] = side.groups()?;
    if a == 0 && b == 0 {
        return Ok(());
    }
    if a != 0 && rules::allows(a as u32, hook.dir, peer, ip.proto, port)? {
        return Ok(());
    }
    if b != 0 && rules::allows(b as u32, hook.dir, peer, ip.proto, port)? {
        return Ok(());
    }
    Err(hook.sg_drop)
}

/// The flow's ports as the connection table keys them (`frag::ports`: a later
/// fragment by its datagram's first); protocols without ports (GRE, ESP, ICMP other
/// than echo) key by none. `None`: a packet whose ports cannot be read (a later
/// fragment whose first did not come by here first, an IPv4 header with options, a
/// short TCP, UDP or SCTP header).
#[inline(always)]
fn flow(ctx: &TcContext, ip: &ipv4::Ipv4, zone: u32) -> Option<l4::Ports> {
    if let Some(p) = frag::ports(ctx, ip, zone) {
        return Some(p);
    }
    if !l4::plain_header(ctx) {
        return None;
    }
    match ip.proto {
        PROTO_TCP | PROTO_UDP | PROTO_SCTP => None,
        PROTO_ICMP if frag::later(ip) => None,
        _ => Some(l4::Ports {
            sport: 0,
            dport: 0,
            tcp_flags: 0,
        }),
    }
}
