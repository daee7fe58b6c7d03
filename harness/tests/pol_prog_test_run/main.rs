//! BPF_PROG_TEST_RUN tests of NetworkACL and SecurityGroup in the datapath (POL-01..03,
//! L2-20, L2-31): frames into the ports' `port_ingress`, through the router and the
//! delivery program, against rule sets compiled by the daemon's own compiler and
//! written by its writer. Every denial is checked by its verdict, its named drop and
//! its rule set's counter; every allowance by the frame that comes out.
//!
//! Subnet A (10.0.1.0/24): ports 0 and 1. Subnet B (10.0.2.0/24): ports 2 and 3.
use std::net::Ipv4Addr;

use juneau::{
    api::{networkacl::AclRule, securitygroup::SecurityGroup},
    features::policy::node::{self as policy, Compiled, PolicyState, compile},
    node::dataplane::{PortKind, PortSpec, Whole},
};
use juneau_common::policy::{SET_ACL, SET_PENDING};
use juneau_harness::{
    frames::{self, fixtures::*},
    router::{self, RouterBed, Seg},
    testrun::{PortBed, TC_ACT_REDIRECT, TC_ACT_SHOT},
    two_subnets::*,
};
use serde_json::json;

/// A TCP segment from port `from` to port `to`'s address and `dport`, sent to the
/// sender's gateway (off-link) or to the neighbour's MAC (within the Subnet: the
/// router answers ARP for every neighbour, so the frame still goes to it).
fn tcp(from: u8, sport: u16, to: u8, dport: u16, syn: bool) -> Vec<u8> {
    let dst_mac = if vni(from) == vni(to) {
        pod_mac(to)
    } else {
        gw(from)
    };
    frames::tcp(
        (pod_mac(from), ip(from), sport),
        (dst_mac, ip(to), dport),
        syn,
        b"",
    )
}

fn acl(ingress: Option<serde_json::Value>, egress: Option<serde_json::Value>) -> Compiled {
    let rules = |v: Option<serde_json::Value>| -> Option<Vec<AclRule>> {
        v.map(|v| serde_json::from_value(v).expect("rules"))
    };
    let (i, e) = (rules(ingress), rules(egress));
    let (ingress, p) = compile::acl_direction(i.as_deref());
    assert!(p.is_none(), "{p:?}");
    let (egress, p) = compile::acl_direction(e.as_deref());
    assert!(p.is_none(), "{p:?}");
    Compiled {
        kind: SET_ACL,
        version: 1,
        dirs: [ingress, egress],
    }
}

fn sg(spec: serde_json::Value, members: &[(&str, &[[u8; 4]])]) -> Compiled {
    let mut groups = Vec::new();
    for (name, addrs) in members {
        let mut g: SecurityGroup = serde_json::from_value(json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup",
            "metadata": {"name": name}, "spec": {"vpc": "v"}
        }))
        .unwrap();
        g.status = Some(juneau::api::securitygroup::SecurityGroupStatus {
            members: addrs
                .iter()
                .map(|a| Ipv4Addr::from(*a).to_string())
                .collect(),
            ..Default::default()
        });
        groups.push(g);
    }
    let g: SecurityGroup = serde_json::from_value(json!({
        "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup",
        "metadata": {"name": "this"}, "spec": spec
    }))
    .unwrap();
    let (set, problems) = policy::compile_sg(&g, &groups);
    assert!(problems.is_empty(), "{problems:?}");
    set
}

/// Four Subnet ports on two Subnets, A's segment naming rule set `acl_a`, the ports
/// in `with_sg` carrying SecurityGroups.
fn bed(acl_a: u32, with_sg: &[u8]) -> RouterBed {
    let bed = PortBed::new(4);
    let mut dp =
        Whole::of(juneau::node::Dataplane::load_sized(None, 4096).expect("load")).expect("writers");
    let here = Ipv4Addr::UNSPECIFIED;
    let mut state = router::state(
        &[SEG_A, SEG_B],
        &(0..4u8)
            .map(|i| (vni(i), ip(i), pod_mac(i), here))
            .collect::<Vec<_>>(),
    );
    state.segments.get_mut(&VNI_A).unwrap().acl = acl_a;
    dp.sync_router(&state).unwrap();
    for i in 0..4u8 {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i as usize),
            vni: vni(i),
            mtu: 0,
            peer: true,
            security_groups: with_sg.contains(&i),
            kind: PortKind::Subnet {
                mac: pod_mac(i),
                ip: ip(i).into(),
            },
        })
        .unwrap();
    }
    RouterBed { bed, dp }
}

fn set_policy(b: &mut RouterBed, sets: &[(u32, Compiled)], nics: &[(u8, [u16; 2])]) -> u32 {
    let want = PolicyState {
        sets: sets.iter().cloned().collect(),
        nics: nics
            .iter()
            .map(|(i, g)| ((vni(*i), Ipv4Addr::from(ip(*i))), *g))
            .collect(),
    };
    b.dp.policy.sync(&want).unwrap().epoch
}

#[track_caller]
fn passes(b: &RouterBed, port: u8, frame: &[u8]) {
    let run = b.send(port as usize, frame);
    assert_eq!(run.verdict, TC_ACT_REDIRECT, "{:?}", b.drops());
}

#[track_caller]
fn dropped(b: &RouterBed, port: u8, frame: &[u8], reason: &str) {
    let before = b.drops().get(reason).copied().unwrap_or(0);
    let run = b.send(port as usize, frame);
    assert_eq!(run.verdict, TC_ACT_SHOT, "{:?}", b.drops());
    assert_eq!(
        b.drops().get(reason).copied().unwrap_or(0),
        before + 1,
        "{:?}",
        b.drops()
    );
}

const ACL_ID: u32 = 7;

#[test]
fn pol_01_the_first_matching_rule_by_priority_decides_and_no_match_denies() {
    let mut b = bed(ACL_ID, &[]);
    let rules = acl(
        None,
        Some(json!([
            {"priority": 20, "action": "allow", "protocol": "tcp", "cidr": "10.0.2.0/24"},
            {"priority": 10, "action": "deny", "protocol": "tcp", "cidr": "10.0.2.12/32",
             "ports": [{"portRange": {"from": 80, "to": 90}}]},
            {"priority": 30, "action": "allow", "protocol": 17, "cidr": "10.0.2.0/24"},
        ])),
    );
    set_policy(&mut b, &[(ACL_ID, rules)], &[]);
    // Priority 10 denies 80-90 to port 2 though 20 allows all TCP to B.
    dropped(&b, 0, &tcp(0, 40000, 2, 85, true), "POLICY_ACL_EGRESS");
    assert!(
        b.dp.conntrack.entries().unwrap().is_empty(),
        "a denial writes nothing"
    );
    passes(&b, 0, &tcp(0, 40001, 2, 91, true));
    passes(&b, 0, &tcp(0, 40002, 3, 85, true));
    // ICMP matches no rule: denied.
    let ping = frames::icmp_echo((pod_mac(0), ip(0)), (GW_A, ip(2)), 64, 8, false);
    dropped(&b, 0, &ping, "POLICY_ACL_EGRESS");
    let [_, egress] = b.dp.policy.counters(ACL_ID).unwrap();
    assert_eq!(
        (
            egress.allowed,
            egress.denied_by_rule,
            egress.denied_no_match
        ),
        (2, 1, 1)
    );
}

#[test]
fn l2_20_pol_01_the_reply_of_an_allowed_connection_crosses_an_ingress_deny() {
    let mut b = bed(ACL_ID, &[]);
    // Ingress `[]`: everything denied; egress omitted: everything allowed.
    set_policy(&mut b, &[(ACL_ID, acl(Some(json!([])), None))], &[]);
    passes(&b, 0, &tcp(0, 40000, 2, 80, true));
    // The SYN-ACK from B, delivered to port 0 across the gateway: a reply.
    let reply = frames::tcp((pod_mac(2), ip(2), 80), (GW_B, ip(0), 40000), false, b"");
    passes(&b, 2, &reply);
    // A connection B opens is new: the ingress rules deny it at port 0's delivery.
    let open = frames::tcp((pod_mac(2), ip(2), 5000), (GW_B, ip(0), 22), true, b"");
    dropped(&b, 2, &open, "POLICY_ACL_INGRESS");
}

/// Fragmentation needed, next-hop MTU 1400.
const FRAG_NEEDED: (u8, u8, [u8; 4]) = (3, 4, [0, 0, 0x05, 0x78]);
/// Port unreachable.
const PORT_UNREACHABLE: (u8, u8, [u8; 4]) = (3, 3, [0; 4]);

#[test]
fn l2_20_pol_01_an_icmp_error_of_an_allowed_connection_crosses_a_deny_and_others_do_not() {
    // A's ACL: ingress `[]` (everything denied), egress omitted (allowed).
    let mut b = bed(ACL_ID, &[]);
    set_policy(&mut b, &[(ACL_ID, acl(Some(json!([])), None))], &[]);
    let syn = tcp(0, 40000, 2, 80, true);
    passes(&b, 0, &syn);
    // B's answer to A's segment: fragmentation needed for what A sent (path MTU
    // discovery), across the ingress-deny: it belongs to the connection.
    let error =
        |quoted: &[u8], what| frames::icmp_error((pod_mac(2), ip(2)), (GW_B, ip(0)), what, quoted);
    passes(&b, 2, &error(&syn, FRAG_NEEDED));
    // Quoting a connection A never opened: an ICMP packet like any other, denied.
    let never = tcp(0, 40009, 2, 81, true);
    dropped(&b, 2, &error(&never, FRAG_NEEDED), "POLICY_ACL_INGRESS");
    // Quoting A's connection but sent to another Pod of A's segment (the same zone):
    // no connection's error, denied.
    let forged = frames::icmp_error((pod_mac(2), ip(2)), (GW_B, ip(1)), FRAG_NEEDED, &syn);
    dropped(&b, 2, &forged, "POLICY_ACL_INGRESS");
    // The other way: A's ACL denies all egress, allows all ingress. B opens to A; A's
    // port unreachable about it leaves A's segment, an unrelated one does not.
    let mut b = bed(ACL_ID, &[]);
    set_policy(&mut b, &[(ACL_ID, acl(None, Some(json!([]))))], &[]);
    let open = frames::tcp((pod_mac(2), ip(2), 5000), (GW_B, ip(0), 22), true, b"");
    passes(&b, 2, &open);
    let refuse = |quoted: &[u8]| {
        frames::icmp_error((pod_mac(0), ip(0)), (GW_A, ip(2)), PORT_UNREACHABLE, quoted)
    };
    passes(&b, 0, &refuse(&open));
    let other = frames::tcp((pod_mac(2), ip(2), 5001), (GW_B, ip(0), 23), true, b"");
    dropped(&b, 0, &refuse(&other), "POLICY_ACL_EGRESS");
}

#[test]
fn pol_01_a_fragmented_datagram_is_judged_as_its_connection_every_fragment_of_it() {
    // A's ACL: out, UDP 5000 only; in, nothing (replies only).
    let mut b = bed(ACL_ID, &[]);
    let egress = json!([
        {"priority": 10, "action": "allow", "protocol": "udp", "ports": [{"port": 5000}]},
    ]);
    set_policy(&mut b, &[(ACL_ID, acl(Some(json!([])), Some(egress)))], &[]);
    let big = |sport, dport| {
        frames::udp_ports((pod_mac(0), ip(0), sport), (GW_A, ip(2), dport), &[7; 600])
    };
    // To 5000: the first fragment carries the ports, the later one is keyed by them.
    let (first, later) = frames::fragments(&big(40000, 5000), 304, 0x1111);
    passes(&b, 0, &first);
    passes(&b, 0, &later);
    // To 6000: the first is denied, and so is the later one, by the same rules.
    let (first, later) = frames::fragments(&big(40001, 6000), 304, 0x2222);
    dropped(&b, 0, &first, "POLICY_ACL_EGRESS");
    dropped(&b, 0, &later, "POLICY_ACL_EGRESS");
    // A later fragment whose first never came: no ports to judge by.
    let (_, stray) = frames::fragments(&big(40002, 5000), 304, 0x3333);
    dropped(&b, 0, &stray, "POLICY_L4_UNREADABLE");
    // B's large answer crosses A's ingress `[]` whole: the reply's fragments too.
    let answer = frames::udp_ports((pod_mac(2), ip(2), 5000), (GW_B, ip(0), 40000), &[9; 600]);
    let (first, later) = frames::fragments(&answer, 304, 0x4444);
    passes(&b, 2, &first);
    passes(&b, 2, &later);
}

#[test]
fn l2_31_pol_01_traffic_within_the_segment_never_meets_its_acl() {
    let mut b = bed(ACL_ID, &[]);
    set_policy(
        &mut b,
        &[(ACL_ID, acl(Some(json!([])), Some(json!([]))))],
        &[],
    );
    // Port 0 to port 1, both in A: not across the gateway.
    passes(&b, 0, &tcp(0, 40000, 1, 80, true));
    passes(&b, 1, &tcp(1, 80, 0, 40000, false));
    // Out of A: denied both ways.
    dropped(&b, 0, &tcp(0, 40001, 2, 80, true), "POLICY_ACL_EGRESS");
    dropped(&b, 2, &tcp(2, 40001, 0, 80, true), "POLICY_ACL_INGRESS");
}

const WEB: u16 = 11;
const CLIENTS: u16 = 12;

#[test]
fn pol_02_security_groups_allow_by_cidr_and_by_group_and_deny_the_rest() {
    let mut b = bed(0, &[1, 2, 3]);
    // Port 2 carries "web": TCP 80 from 10.0.1.10/32, and 443 from the members of
    // "clients" (port 1). Egress omitted: allowed.
    let web = sg(
        json!({"vpc": "v", "ingress": [
            {"from": [{"cidr": "10.0.1.10/32"}], "protocol": "tcp", "ports": [{"port": 80}]},
            {"from": [{"securityGroupRef": {"name": "clients"}}], "protocol": "tcp",
             "ports": [{"port": 443}]},
        ]}),
        &[("clients", &[ip(1)])],
    );
    // Port 1 carries "clients": ingress omitted (denied), egress only to B.
    let clients = sg(
        json!({"vpc": "v", "egress": [{"to": [{"cidr": "10.0.2.0/24"}]}]}),
        &[],
    );
    set_policy(
        &mut b,
        &[(WEB as u32, web), (CLIENTS as u32, clients)],
        &[(2, [WEB, 0]), (1, [CLIENTS, 0])],
    );
    passes(&b, 0, &tcp(0, 40000, 2, 80, true));
    dropped(&b, 0, &tcp(0, 40001, 2, 443, true), "POLICY_SG_INGRESS");
    passes(&b, 1, &tcp(1, 40002, 2, 443, true));
    dropped(&b, 1, &tcp(1, 40003, 2, 80, true), "POLICY_SG_INGRESS");
    // "clients" egress: B only; port 0 (A) is refused as port 1 sends.
    dropped(&b, 1, &tcp(1, 40004, 0, 80, true), "POLICY_SG_EGRESS");
    // Port 3 carries groups the daemon has not written: denied, never let through.
    dropped(&b, 0, &tcp(0, 40005, 3, 80, true), "POLICY_SET_MISSING");
    set_policy(&mut b, &[], &[(3, [SET_PENDING, 0])]);
    dropped(&b, 0, &tcp(0, 40006, 3, 80, true), "POLICY_SET_MISSING");
}

/// A small deterministic generator (xorshift), so the cases are the same every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What POL-01 says of a packet under one direction's rules, read from their JSON
/// here, apart from the daemon's compiler (whose bug the datapath would faithfully
/// run): the matching rule of lowest priority decides, no match denies. Reads what
/// the generator below writes (a `cidr`, `all`/`tcp`/`udp`, `port` and `portRange`).
fn spec_allows(rules: &[serde_json::Value], peer: [u8; 4], proto: u8, port: u16) -> bool {
    let peer = u32::from_be_bytes(peer);
    let port = u64::from(port);
    let matches = |r: &&serde_json::Value| {
        let (net, len) = r["cidr"].as_str().unwrap().split_once('/').unwrap();
        let net = u32::from(net.parse::<Ipv4Addr>().unwrap());
        let mask = u32::MAX
            .checked_shl(32 - len.parse::<u32>().unwrap())
            .unwrap_or(0);
        let proto_ok = match r["protocol"].as_str().unwrap() {
            "all" => true,
            "tcp" => proto == 6,
            "udp" => proto == 17,
            other => panic!("protocol {other} is not the generator's"),
        };
        let ports = r["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let port_ok = ports.is_empty()
            || ports.iter().any(|p| {
                let (from, to) = match p.get("port") {
                    Some(one) => (one.as_u64().unwrap(), one.as_u64().unwrap()),
                    None => (
                        p["portRange"]["from"].as_u64().unwrap(),
                        p["portRange"]["to"].as_u64().unwrap(),
                    ),
                };
                from <= port && port <= to
            });
        peer & mask == net & mask && proto_ok && port_ok
    };
    rules
        .iter()
        .filter(matches)
        .min_by_key(|r| r["priority"].as_u64().unwrap())
        .is_some_and(|r| r["action"] == "allow")
}

const VNI_L: u32 = 23;
const SEG_L: Seg = Seg {
    vni: VNI_L,
    cidr: "10.0.3.0/24",
    gw: [10, 0, 3, 1],
    gw_mac: [0x02, 0x4a, 0x4e, 0, 0, 23],
    mtu: 1500,
};

const fn l2_ip(i: u8) -> [u8; 4] {
    [10, 0, 3, 10 + i]
}

/// An IPv6 frame (a neighbour solicitation's size; its contents are never read).
fn ipv6(from: [u8; 6], to: [u8; 6]) -> Vec<u8> {
    frames::raw(to, from, 0x86dd, &[0x60; 72])
}

mod changes;
