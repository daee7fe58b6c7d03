//! BPF_PROG_TEST_RUN tests of each path of `port_ingress`: verdict, bytes out, map
//! contents and drop counters. Ports are real veths of a fresh namespace, so flooded
//! copies are counted by the interfaces that send them.
use juneau::node::{
    Dataplane,
    dataplane::{PortKind, PortSpec},
};
use juneau_common::{l2::LEARN_REFRESH_NS, port::PORT_PEER};
use juneau_harness::{
    frames::{self, BROADCAST, fixtures::*},
    testrun::{PortBed, TC_ACT_REDIRECT, TC_ACT_SHOT, run_tc},
};

const VNI: u32 = 4242;

struct Bed {
    bed: PortBed,
    dp: Dataplane,
}

impl Bed {
    /// `n` ports on segment `VNI`.
    fn new(n: usize) -> Bed {
        let bed = PortBed::new(n);
        let mut dp = Dataplane::load(None).expect("load");
        for i in 0..n {
            dp.configure_port(PortSpec {
                ifindex: bed.ifindex(i),
                vni: VNI,
                mtu: 0,
                peer: true,
                security_groups: false,
                kind: PortKind::Switched,
            })
            .unwrap();
        }
        Bed { bed, dp }
    }

    fn send(&self, port: usize, frame: &[u8]) -> juneau_harness::testrun::Run {
        self.bed.send(self.dp.l2_port_program(), port, frame)
    }

    fn entry(&self, mac: [u8; 6]) -> Option<juneau_common::FdbEntry> {
        self.dp
            .fdb(VNI)
            .unwrap()
            .into_iter()
            .find(|(k, _)| k.mac == mac)
            .map(|(_, e)| e)
    }

    fn drops(&self, reason: &str) -> u64 {
        self.dp.drops().unwrap()[reason]
    }

    fn tx(&self) -> Vec<u64> {
        (0..self.bed.ports.len()).map(|i| self.bed.tx(i)).collect()
    }
}

#[test]
fn l2_28_prog_unknown_unicast_learns_source_and_floods_every_other_port() {
    let b = Bed::new(3);
    let before = b.tx();
    let f = frames::raw(pod_mac(9), pod_mac(0), 0x88b5, b"unknown destination");
    let run = b.send(0, &f);
    assert_eq!(
        run.verdict, TC_ACT_REDIRECT,
        "the last copy leaves by redirect"
    );
    let after = b.tx();
    // Ports are walked in ifindex order: port 1 gets a clone, port 2 the original.
    assert_eq!(
        after[0] - before[0],
        0,
        "a copy went back out of the ingress port"
    );
    assert_eq!(after[1] - before[1], 1, "port 1 must get exactly one clone");
    assert_eq!(
        after[2] - before[2],
        0,
        "port 2 gets the redirected original, not a clone"
    );
    let e = b.entry(pod_mac(0)).expect("source learned");
    assert_eq!(e.ifindex, b.bed.ifindex(0));
    assert_eq!(e.vtep, 0);
    assert_ne!(
        e.flags & PORT_PEER,
        0,
        "delivery flags are copied at learning time"
    );
    assert_eq!(b.drops("CLONE_FAILED"), 0);
}

#[test]
fn l2_28_prog_known_unicast_is_redirected_without_copies() {
    let b = Bed::new(3);
    b.send(1, &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hello"));
    let before = b.tx();
    let run = b.send(0, &frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"to pod1"));
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    assert_eq!(b.tx(), before, "known unicast must not be cloned anywhere");
}

#[test]
fn l2_01_prog_frame_leaves_byte_for_byte_unchanged() {
    let b = Bed::new(2);
    b.send(1, &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hello"));
    for f in [
        frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"experimental"),
        frames::raw(pod_mac(1), pod_mac(0), 0x9000, b"loopback protocol"),
        frames::lldp(pod_mac(0)),
        frames::ipv6_ns(pod_mac(0), pod_ip6(0), pod_ip6(1)),
    ] {
        let run = b.send(0, &f);
        assert_eq!(run.verdict, TC_ACT_REDIRECT);
        assert_eq!(run.data, f, "the datapath changed a frame");
    }
}

#[test]
fn l2_28_prog_frame_to_a_mac_behind_the_ingress_port_is_dropped_as_hairpin() {
    let b = Bed::new(2);
    b.send(
        0,
        &frames::raw(BROADCAST, behind_mac(0, 1), 0x88b5, b"vm behind port 0"),
    );
    let run = b.send(
        0,
        &frames::raw(behind_mac(0, 1), pod_mac(0), 0x88b5, b"hairpin"),
    );
    assert_eq!(run.verdict, TC_ACT_SHOT);
    assert_eq!(b.drops("HAIRPIN"), 1);
}

#[test]
fn l2_28_prog_broadcast_on_a_segment_with_no_other_port_is_dropped() {
    let b = Bed::new(1);
    let run = b.send(0, &frames::raw(BROADCAST, pod_mac(0), 0x88b5, b"alone"));
    assert_eq!(run.verdict, TC_ACT_SHOT);
    assert_eq!(b.drops("NO_OTHER_PORT"), 1);
}

#[test]
fn l2_28_prog_frame_on_an_unconfigured_interface_is_dropped() {
    let b = Bed::new(1);
    let stranger = b.bed.ifindex(0) + 1000;
    let run = run_tc(
        &b.bed.ns,
        b.dp.l2_port_program(),
        stranger,
        &frames::raw(BROADCAST, pod_mac(0), 0x88b5, b"who am i"),
        1,
    );
    assert_eq!(run.verdict, TC_ACT_SHOT);
    assert_eq!(b.drops("NOT_A_PORT"), 1);
}

#[test]
fn l2_28_prog_mac_move_is_followed_at_once_both_ways() {
    let b = Bed::new(3);
    let m = behind_mac(7, 7);
    let from = |p| b.send(p, &frames::raw(BROADCAST, m, 0x88b5, b"roaming"));
    from(0);
    assert_eq!(b.entry(m).unwrap().ifindex, b.bed.ifindex(0));
    from(1);
    assert_eq!(
        b.entry(m).unwrap().ifindex,
        b.bed.ifindex(1),
        "move to port 1 not followed"
    );
    assert_eq!(
        b.dp.port(b.bed.ifindex(0)).unwrap().cache_jiffies,
        0,
        "old port's cache kept"
    );
    from(0);
    assert_eq!(
        b.entry(m).unwrap().ifindex,
        b.bed.ifindex(0),
        "move back not followed"
    );
}

#[test]
fn l2_28_prog_learned_entry_is_refreshed_at_most_once_a_second() {
    let b = Bed::new(2);
    let a = frames::raw(BROADCAST, pod_mac(0), 0x88b5, b"busy sender");
    // A second MAC on the same port (a host behind a bridge in the Pod) takes the
    // port's one-entry learning cache, so the next frame from `a` reaches the table.
    let other = frames::raw(BROADCAST, pod_mac(5), 0x88b5, b"its neighbour");
    b.send(0, &a);
    let learned = b.entry(pod_mac(0)).unwrap();
    // Pretend the entry was written `ago` ns earlier, then send from `a` again.
    let resend_after = |ago: u64| -> u64 {
        let (_, mut table) =
            b.dp.fdb_tables()
                .into_iter()
                .find(|(v, _)| *v == VNI)
                .unwrap();
        let stamp = learned.last_seen_ns - ago;
        let entry = juneau_common::FdbEntry {
            last_seen_ns: stamp,
            ..learned
        };
        table
            .insert(juneau_common::FdbKey::new(pod_mac(0)), entry, 0)
            .unwrap();
        b.send(0, &other);
        b.send(0, &a);
        b.entry(pod_mac(0)).unwrap().last_seen_ns
    };
    let half = LEARN_REFRESH_NS / 2;
    assert_eq!(
        resend_after(half),
        learned.last_seen_ns - half,
        "an entry refreshed {half} ns ago was rewritten (limit {LEARN_REFRESH_NS} ns)"
    );
    let twice = 2 * LEARN_REFRESH_NS;
    assert!(
        resend_after(twice) >= learned.last_seen_ns,
        "an entry last refreshed {twice} ns ago was not refreshed"
    );
}

#[test]
fn l2_28_prog_group_source_address_is_never_learned() {
    let b = Bed::new(2);
    b.send(
        0,
        &frames::raw(BROADCAST, [0x01, 0, 0x5e, 0, 0, 1], 0x88b5, b"bogus source"),
    );
    assert!(b.dp.fdb(VNI).unwrap().is_empty());
}

#[test]
fn l2_28_prog_a_zero_or_group_source_is_forwarded_and_never_learned() {
    let b = Bed::new(2);
    // Port 1's Pod speaks first, so its MAC is known.
    b.send(1, &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hello"));
    for src in [[0u8; 6], [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01], BROADCAST] {
        let before = b.tx();
        let run = b.send(0, &frames::raw(pod_mac(1), src, 0x88b5, b"odd source"));
        assert_eq!(
            run.verdict, TC_ACT_REDIRECT,
            "{src:02x?}: forwarded to the known port"
        );
        assert_eq!(b.tx(), before, "{src:02x?}: by redirect_peer, no flood");
        assert!(b.entry(src).is_none(), "{src:02x?} was learned");
    }
    assert_eq!(
        b.dp.fdb(VNI).unwrap().len(),
        1,
        "only the real source is known"
    );
}

#[test]
fn l2_28_prog_a_full_table_keeps_its_entries_and_still_forwards_every_frame() {
    let b = Bed::new(2);
    // A host of the segment, learned before the flood.
    b.send(1, &frames::raw(BROADCAST, pod_mac(1), 0x88b5, b"hello"));
    let dropped = |b: &Bed| -> u64 {
        b.dp.drops()
            .unwrap()
            .iter()
            .filter(|(r, _)| **r != "LEARN_FAILED")
            .map(|(_, n)| n)
            .sum()
    };
    let (before, refused_before) = (dropped(&b), b.drops("LEARN_FAILED"));
    // More new sources than the table holds: the table fills, the rest is refused and
    // counted, and every frame is forwarded all the same.
    let cap = juneau_common::l2::FDB_ENTRIES;
    let extra = 64;
    let flood_mac = |i: u32| {
        let mut mac = [0x02, 0xfe, 0, 0, 0, 0];
        mac[2..].copy_from_slice(&i.to_be_bytes());
        mac
    };
    for i in 0..cap + extra {
        let run = b.send(0, &frames::raw(BROADCAST, flood_mac(i), 0x88b5, b"flood"));
        assert_eq!(run.verdict, TC_ACT_REDIRECT, "frame {i} was not forwarded");
    }
    assert_eq!(
        b.dp.fdb(VNI).unwrap().len() as u32,
        cap,
        "the table is full"
    );
    // The host learned before is still there (nothing evicted).
    assert_eq!(
        b.entry(pod_mac(1)).map(|e| e.ifindex),
        Some(b.bed.ifindex(1))
    );
    assert!(
        b.entry(flood_mac(0)).is_some(),
        "the first flood source was kept"
    );
    assert!(
        b.entry(flood_mac(cap + extra - 1)).is_none(),
        "a source beyond the capacity was learned"
    );
    // Learned: the host and cap - 1 flood sources; each later one refused once.
    assert_eq!(
        b.drops("LEARN_FAILED") - refused_before,
        u64::from(extra + 1),
        "each source beyond the capacity counted once"
    );
    assert_eq!(dropped(&b), before, "no frame dropped");
    // The host is still reached by one redirect, not a flood.
    let tx = b.tx();
    let run = b.send(
        0,
        &frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"after the flood"),
    );
    assert_eq!(run.verdict, TC_ACT_REDIRECT);
    assert_eq!(b.tx(), tx, "known unicast by redirect_peer, not a flood");
}
