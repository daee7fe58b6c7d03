use std::time::UNIX_EPOCH;

use super::*;
use crate::api::{
    AddressPool, BGPAdvertisement, BGPPeer, addresspool::AddressPoolSpec,
    bgpadvertisement::BGPAdvertisementSpec, bgppeer::BGPPeerSpec,
};

/// Captured from bird 2.0.12 in the bed (docs/bgp-bed/bird.md): node-a peering with
/// "upstream" at 10.200.0.2.
fn fixture(name: &str) -> String {
    let path = format!(
        "{}/src/features/bgp/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn world() -> World {
    let mut w = World::default();
    w.objects.bgp_peers.push(BGPPeer::new(
        "upstream",
        BGPPeerSpec {
            my_asn: 64513,
            peer_asn: 64512,
            peer_address: "10.200.0.2".into(),
            ..Default::default()
        },
    ));
    w.objects.bgp_peers.push(BGPPeer::new(
        "backup",
        BGPPeerSpec {
            my_asn: 64513,
            peer_asn: 64512,
            peer_address: "10.200.0.3".into(),
            ..Default::default()
        },
    ));
    w.objects.address_pools.push(AddressPool::new(
        "wan",
        AddressPoolSpec {
            advertise_mode: "bgp".into(),
            addresses: vec!["203.0.113.0/24".into()],
        },
    ));
    w.objects.bgp_advertisements.push(BGPAdvertisement::new(
        "wan-all",
        BGPAdvertisementSpec {
            address_pools: vec!["wan".into(), "later".into()],
            ..Default::default()
        },
    ));
    w
}

fn speaker(protocols: &str) -> Speaker {
    Ok((
        parse_status(&fixture("status.txt")).unwrap(),
        parse_protocols(&fixture(protocols)).unwrap(),
    ))
}

/// The speaker's clock read 2026-12-06 05:55:56.372 when the session had been up since
/// 05:55:55.102: 1.27 s before `now`, whatever the speaker's time zone.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

#[test]
fn bgp_03_sessions_advertisements_errors_and_ready_from_the_speaker() {
    let w = world();
    let ip = "10.200.0.1".parse().unwrap();
    let s = node_state(&w, "node-a", ip, &speaker("protocols-up.txt"), true, now());
    let up = &s.bgp_sessions[1];
    assert_eq!(
        (up.peer_name.as_str(), up.state.as_str(), up.exported_routes),
        ("upstream", "Up", 2)
    );
    assert_eq!(
        up.up_since,
        rfc3339(now() - Duration::from_millis(1270)),
        "upSince = now - (server time - since)"
    );
    // A BGPPeer the speaker has no protocol for yet.
    assert_eq!(
        (
            s.bgp_sessions[0].peer_name.as_str(),
            s.bgp_sessions[0].state.as_str()
        ),
        ("backup", "Unknown")
    );
    assert_eq!(s.sessions_up, 1);
    assert_eq!(s.advertisements.len(), 1);
    assert_eq!(s.advertisements[0].address_pool, "wan");
    assert_eq!(s.advertisements[0].prefixes, ["203.0.113.0/24"]);
    assert!(!s.advertisements[0].last_synced_at.is_empty());
    assert_eq!(
        (s.errors[0].kind.as_str(), s.errors[0].name.as_str()),
        ("BGPAdvertisement", "wan-all")
    );
    assert!(
        s.errors[0].message.contains("AddressPool later"),
        "{:?}",
        s.errors
    );
    let ready = &s.conditions[1];
    assert_eq!(
        (
            ready.type_.as_str(),
            ready.status.as_str(),
            ready.reason.as_str()
        ),
        ("Ready", "True", "Healthy")
    );
}

#[test]
fn bgp_03_a_peer_that_refuses_is_shown_with_its_notification() {
    let w = world();
    let s = node_state(
        &w,
        "node-a",
        "10.200.0.1".parse().unwrap(),
        &speaker("protocols-bad-as.txt"),
        true,
        now(),
    );
    let refused = &s.bgp_sessions[1];
    assert_eq!(refused.state, "Down");
    assert_eq!(
        refused.last_error,
        "Received: Bad peer AS (NOTIFICATION 2/2)"
    );
    assert_eq!(refused.up_since, "");
    let ready = &s.conditions[1];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NoSessionUp")
    );
    assert!(ready.message.contains("Bad peer AS"), "{}", ready.message);
}

#[test]
fn bgp_03_a_silent_speaker_or_an_old_file_is_not_ready() {
    let w = world();
    let ip = "10.200.0.1".parse().unwrap();
    let s = node_state(
        &w,
        "node-a",
        ip,
        &Err("connection refused".into()),
        true,
        now(),
    );
    assert_eq!(s.conditions[0].status, "False");
    assert_eq!(s.conditions[1].reason, "SpeakerDown");
    assert!(s.bgp_sessions.iter().all(|x| x.state == "Unknown"));
    let s = node_state(&w, "node-a", ip, &speaker("protocols-up.txt"), false, now());
    assert_eq!(s.conditions[1].reason, "NotApplied");
    assert_eq!(s.advertisements[0].last_synced_at, "");
}

#[test]
fn bgp_03_a_node_with_the_speaker_off_says_so() {
    let w = world();
    let s = node_state(
        &w,
        "node-a",
        "10.200.0.1".parse().unwrap(),
        &Err(DISABLED.into()),
        false,
        now(),
    );
    let ready = &s.conditions[1];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "SpeakerDisabled")
    );
    assert!(s.bgp_sessions.iter().all(|x| x.state == "Unknown"));
}
