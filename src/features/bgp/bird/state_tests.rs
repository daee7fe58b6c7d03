use super::*;

use std::time::UNIX_EPOCH;

/// Captured from bird 2.0.12 in the bed (docs/bgp-bed/bird.md): node-a peering with "upstream".
fn fixture(name: &str) -> String {
    let path = format!(
        "{}/src/features/bgp/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn time(text: &str) -> BirdTime {
    BirdTime::parse(text).expect("time")
}

fn only_session(name: &str) -> Session {
    let sessions = parse_protocols(&fixture(name)).expect("protocols");
    assert_eq!(sessions.len(), 1, "{name}: one BGP protocol");
    sessions.into_iter().next().expect("one")
}

#[test]
fn bgp_03_show_status_gives_server_time_and_running() {
    let status = parse_status(&fixture("status.txt")).expect("status");
    assert_eq!(status.version, "BIRD 2.0.12");
    assert_eq!(status.router_id, Some(Ipv4Addr::new(10, 200, 0, 1)));
    assert_eq!(status.server_time, time("2026-12-06 05:55:56.372"));
    assert_eq!(status.last_reboot, Some(time("2026-12-06 05:55:54.333")));
    assert_eq!(status.condition, "Daemon is up and running");
    assert!(status.running());
    assert!(!status.graceful_recovery);
}

#[test]
fn bgp_03_show_status_during_graceful_restart_recovery() {
    // Captured 0.1 s after a start with -R: exports wait for `graceful restart wait`.
    let status = parse_status(&fixture("status-recovery.txt")).expect("status");
    assert!(status.graceful_recovery);
    assert!(status.running());
    assert_eq!(status.condition, "Daemon is up and running");
}

#[test]
fn bgp_03_status_without_server_time_is_an_error() {
    assert_eq!(
        parse_status("BIRD 2.0.12\nDaemon is up and running\n"),
        Err(StateError::NoServerTime)
    );
    let shutting = "Current server time is 2026-12-06 05:55:56.372\nShutdown in progress\n";
    assert!(!parse_status(shutting).expect("status").running());
}

#[test]
fn bgp_03_an_established_session_is_up_with_its_exported_routes() {
    let s = only_session("protocols-up.txt");
    assert_eq!(s.protocol, "jn-upstream");
    assert_eq!(s.peer_name.as_deref(), Some("upstream"));
    assert_eq!(s.peer_address, Some(Ipv4Addr::new(10, 200, 0, 2)));
    assert_eq!(s.state, SessionState::Up);
    assert_eq!(s.bgp_state.as_deref(), Some("Established"));
    assert_eq!(s.since, Some(time("2026-12-06 05:55:55.102")));
    assert_eq!(s.last_error, None);
    // The static protocol's "2 imported, 0 exported" is not the session's.
    assert_eq!(s.exported_routes, 2);
}

#[test]
fn bgp_03_up_since_is_now_minus_the_age_on_the_speakers_clock() {
    let status = parse_status(&fixture("status.txt")).expect("status");
    let s = only_session("protocols-up.txt");
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let since = s.since.expect("since");
    // 05:55:56.372 - 05:55:55.102 = 1.270 s, whatever zone the speaker is in.
    assert_eq!(
        up_since(now, status.server_time, since),
        now - Duration::from_millis(1270)
    );
    // A Since after the server time (a clock step) is "now", not the future.
    assert_eq!(up_since(now, since, status.server_time), now);
}

#[test]
fn bgp_03_show_protocols_all_gives_sessions_and_the_notification() {
    // node-a's myASN became 64999; the upstream expects 64513 and sent 2/2.
    let s = only_session("protocols-bad-as.txt");
    assert_eq!(s.peer_name.as_deref(), Some("upstream"));
    assert_eq!(s.state, SessionState::Down);
    assert_eq!(s.bgp_state.as_deref(), Some("Idle"));
    assert_eq!(s.exported_routes, 0);
    let err = s.last_error.expect("last error");
    assert_eq!(err.text, "Received: Bad peer AS");
    assert_eq!(err.notification, Some((2, 2)));
    assert_eq!(err.to_string(), "Received: Bad peer AS (NOTIFICATION 2/2)");
}

#[test]
fn bgp_03_the_refusing_side_shows_the_notification_it_sent() {
    // The upstream's own view (a plain bird): class "BGP Error: " is a sent one.
    let s = only_session("peer-protocols-bad-as.txt");
    assert_eq!(s.peer_name, None);
    let err = s.last_error.expect("last error");
    assert_eq!(err.to_string(), "BGP Error: Bad peer AS (NOTIFICATION 2/2)");
}

#[test]
fn bgp_03_a_peer_that_is_absent_is_down_with_connection_refused() {
    let s = only_session("protocols-refused.txt");
    assert_eq!(s.state, SessionState::Down);
    assert_eq!(s.bgp_state.as_deref(), Some("Active"));
    let err = s.last_error.expect("last error");
    assert_eq!(err.notification, None);
    assert_eq!(err.to_string(), "Socket: Connection refused");
}

#[test]
fn bgp_03_a_peer_that_shut_down_sent_a_cease() {
    let s = only_session("protocols-peer-down.txt");
    let err = s.last_error.expect("last error");
    assert_eq!(
        err.to_string(),
        "Received: Administrative shutdown (NOTIFICATION 6/2)"
    );
}

#[test]
fn bgp_03_a_silent_bfd_is_birds_own_error_not_a_notification() {
    // node-a's BFD input dropped (nft, in the bed's namespace): after 3 x 100 ms
    // BIRD stops the session itself; the upstream then logs "Received: Cease".
    let s = only_session("protocols-bfd-down.txt");
    assert_eq!(s.state, SessionState::Down);
    let err = s.last_error.expect("last error");
    assert_eq!(err.notification, None);
    assert_eq!(err.to_string(), "Error: BFD session down");
}

#[test]
fn bgp_02_a_changed_static_route_leaves_the_session_since_unchanged() {
    // Captured after 11 `configure`s of changed static routes (bed, docs/bgp-bed/bird.md).
    let before = only_session("protocols-up.txt");
    let after = only_session("protocols-after-configure.txt");
    assert_eq!(after.since, before.since);
    assert_eq!(after.state, SessionState::Up);
    assert_eq!(after.exported_routes, 3);
}

#[test]
fn bgp_03_a_peer_without_a_protocol_is_unknown() {
    let sessions = parse_protocols(&fixture("protocols-up.txt")).expect("protocols");
    assert_eq!(state_of(&sessions, "upstream"), SessionState::Up);
    assert_eq!(state_of(&sessions, "upstream-b"), SessionState::Unknown);
}

#[test]
fn bgp_03_every_text_of_birds_table_maps_back() {
    for (code, sub, text) in BGP_MSG_TABLE {
        assert_eq!(notification_code(text), Some((*code, *sub)), "{text}");
    }
    assert_eq!(notification_code("Unknown error 6.9"), Some((6, 9)));
    assert_eq!(notification_code("Connection refused"), None);
    // BIRD's sent errors are class "BGP Error: " (the log says "Error: ").
    assert_eq!(
        LastError::new("BGP Error: Hold timer expired").notification,
        Some((4, 0))
    );
    // Class "Error: " is BIRD's own misc errors: no NOTIFICATION.
    assert_eq!(LastError::new("Error: BFD session down").notification, None);
}

#[test]
fn bgp_03_bird_times_parse_and_subtract_across_a_year() {
    let a = time("2026-12-31 23:59:59.500");
    let b = time("2027-01-01 00:00:00.250");
    assert_eq!(b.0 - a.0, 750);
    assert_eq!(time("1970-01-01 00:00:01").0, 1000);
    assert_eq!(
        time("2024-02-29 00:00:00.5").0 + 500,
        time("2024-02-29 00:00:01").0
    );
    for bad in [
        "",
        "2026-12-06",
        "2026-13-01 00:00:00",
        "2026-12-06 05:53",
        "2026-12-06 05:55:55.1021",
        "x y",
    ] {
        assert!(BirdTime::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn bgp_03_text_that_is_not_a_protocol_list_is_refused() {
    assert_eq!(parse_protocols("").expect("empty"), Vec::new());
    let err = parse_protocols("syntax error, unexpected CF_SYM_UNDEFINED\n");
    assert!(matches!(err, Err(StateError::NotProtocols(_))), "{err:?}");
}
