use super::*;

use std::io::Cursor;
use std::os::unix::net::UnixListener;
use std::time::Instant;

/// Plays back bytes captured from bird 2.0.12's socket and keeps what was sent.
struct Canned {
    input: Cursor<Vec<u8>>,
    sent: Vec<u8>,
}

impl Canned {
    fn new(bytes: &[u8]) -> Self {
        Self {
            input: Cursor::new(bytes.to_vec()),
            sent: Vec::new(),
        }
    }
}

impl Read for Canned {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Canned {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.sent.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/src/features/bgp/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ctl(raw: &str) -> BirdCtl<Canned> {
    BirdCtl::new(Canned::new(&fixture(raw))).expect("welcome")
}

fn sent(ctl: BirdCtl<Canned>) -> String {
    String::from_utf8(ctl.into_inner().sent).expect("utf-8")
}

#[test]
fn bgp_03_every_captured_reply_reads_as_birdc_printed_it() {
    // Each .raw holds the socket's bytes (welcome included), each .txt the lines
    // without codes and without the empty code-0 end, i.e. birdc's output.
    let commands = [
        ("status", "show status"),
        ("status-recovery", "show status"),
        ("protocols-up", "show protocols all"),
        ("protocols-bad-as", "show protocols all"),
        ("protocols-refused", "show protocols all"),
        ("protocols-peer-down", "show protocols all"),
        ("protocols", "show protocols"),
        ("bfd-up", "show bfd sessions"),
        ("protocols-bfd-down", "show protocols all"),
        ("protocols-after-configure", "show protocols all"),
        ("peer-protocols-bad-as", "show protocols all"),
        ("bfd-down", "show bfd sessions"),
        ("status-refused", "show status"),
        ("status-after-configure", "show status"),
        ("peer-routes-up", "show route"),
    ];
    for (name, command) in commands {
        let mut c = ctl(&format!("{name}.raw"));
        assert_eq!(c.welcome, "BIRD 2.0.12 ready.");
        let reply = c.command(command).expect(name);
        let txt = String::from_utf8(fixture(&format!("{name}.txt"))).expect("utf-8");
        assert_eq!(reply.body(), txt, "{name}");
        assert_eq!(sent(c), format!("{command}\n"));
    }
}

#[test]
fn bgp_03_status_keeps_codes_and_continuations() {
    let reply = ctl("status.raw").status().expect("status");
    assert_eq!(reply.lines[0], (1000, "BIRD 2.0.12".to_string()));
    // `1011-Router ID ...` then ` Hostname is vm`: the continuation carries 1011.
    assert_eq!(reply.lines[2], (1011, "Hostname is vm".to_string()));
    assert_eq!(reply.final_code(), Some(code::STATUS));
    assert_eq!(reply.text(code::STATUS), Some("Daemon is up and running"));
    assert!(!reply.is_error());
}

#[test]
fn bgp_03_protocols_all_ends_with_an_empty_code_0_line() {
    let reply = ctl("protocols-up.raw").protocols_all().expect("protocols");
    assert_eq!(reply.lines.last(), Some(&(code::OK, String::new())));
    assert_eq!(reply.lines[0].0, 2002);
    assert!(
        reply
            .lines
            .iter()
            .any(|(c, t)| *c == 1006 && t == "  Description:    BGPPeer upstream")
    );
}

#[test]
fn bgp_02_configure_codes_as_bird_2_0_12_sent_them() {
    // A changed static route: 0003 at once (no protocol restarts).
    let reply = ctl("configure.raw").configure().expect("configure");
    assert_eq!(reply.final_code(), Some(code::RECONFIGURED));
    assert_eq!(reply.lines[0].0, code::READING_CONFIGURATION);
    // The same file again: 0003 too.
    let same = ctl("configure-unchanged.raw")
        .configure()
        .expect("configure");
    assert_eq!(same.final_code(), Some(code::RECONFIGURED));
    // A changed peer block: 0004, the protocol restarts after the reply.
    let peer = ctl("configure-peer-changed.raw")
        .configure()
        .expect("configure");
    assert_eq!(peer.final_code(), Some(code::RECONFIGURATION_IN_PROGRESS));
    assert_eq!(reply.configured(), Configured::Done);
    assert_eq!(peer.configured(), Configured::InProgress);
}

#[test]
fn bgp_02_configure_check_says_ok_or_names_file_line_and_column() {
    let path = Path::new("/tmp/jn/bgp-bird/run/a/good.conf");
    let mut c = ctl("configure-check-ok.raw");
    let ok = c.configure_check(path).expect("check");
    assert_eq!(ok.final_code(), Some(code::CONFIGURATION_OK));
    assert_eq!(
        sent(c),
        "configure check \"/tmp/jn/bgp-bird/run/a/good.conf\"\n"
    );

    let bad = ctl("configure-check-bad.raw")
        .configure_check(Path::new("/tmp/jn/bgp-bird/run/a/bad.conf"))
        .expect("check");
    assert!(bad.is_error());
    assert_eq!(
        bad.text(code::CONFIGURATION_ERROR),
        Some("/tmp/jn/bgp-bird/run/a/bad.conf:16:24 syntax error, unexpected CF_SYM_UNDEFINED")
    );
    assert_eq!(ok.configured(), Configured::Done);
    assert_eq!(
        bad.configured(),
        Configured::Refused(
            "/tmp/jn/bgp-bird/run/a/bad.conf:16:24 syntax error, unexpected CF_SYM_UNDEFINED"
                .into()
        )
    );
    let symbol = ctl("configure-check-bad-symbol.raw")
        .configure_check(Path::new("/tmp/jn/bgp-bird/run/a/bad2.conf"))
        .expect("check");
    assert_eq!(
        symbol.configured(),
        Configured::Refused("/tmp/jn/bgp-bird/run/a/bad2.conf:13:17 Symbol too long".into())
    );
    let missing = ctl("configure-check-missing.raw")
        .configure_check(Path::new("/tmp/jn/bgp-bird/run/a/missing.conf"))
        .expect("check");
    assert_eq!(
        missing.text(code::CONFIGURATION_ERROR),
        Some("/tmp/jn/bgp-bird/run/a/missing.conf: No such file or directory")
    );
}

#[test]
fn bgp_01_down_is_acknowledged_with_0007() {
    let reply = ctl("down.raw").down().expect("down");
    assert_eq!(
        reply.lines,
        vec![(code::SHUTDOWN_ORDERED, "Shutdown requested".to_string())]
    );
}

#[test]
fn bgp_03_a_reply_cut_short_or_garbled_is_an_error() {
    let cut = b"0001 BIRD 2.0.12 ready.\n1000-BIRD 2.0.12\n1011-Router ID";
    let err = BirdCtl::new(Canned::new(cut)).expect("welcome").status();
    assert!(matches!(err, Err(CtlError::Closed)), "{err:?}");
    for garbage in ["HTTP/1.1 400\n", "12 x\n", "0013x\n", "00a3 x\n"] {
        let bytes = format!("0001 BIRD 2.0.12 ready.\n{garbage}");
        let err = BirdCtl::new(Canned::new(bytes.as_bytes()))
            .expect("welcome")
            .status();
        assert!(
            matches!(err, Err(CtlError::Malformed(_))),
            "{garbage:?}: {err:?}"
        );
    }
    let orphan = b"0001 BIRD 2.0.12 ready.\n continuation first\n";
    let err = BirdCtl::new(Canned::new(orphan)).expect("welcome").status();
    assert!(matches!(err, Err(CtlError::Malformed(_))), "{err:?}");
}

#[test]
fn bgp_03_a_socket_that_does_not_greet_is_not_bird() {
    let err = BirdCtl::new(Canned::new(b"0013 Daemon is up and running\n")).err();
    assert!(matches!(err, Some(CtlError::Welcome(_))), "{err:?}");
}

#[test]
fn bgp_03_spontaneous_lines_are_not_part_of_the_reply() {
    let bytes = b"0001 BIRD 2.0.12 ready.\n+log line\n0007 Shutdown requested\n";
    let reply = BirdCtl::new(Canned::new(bytes))
        .expect("welcome")
        .down()
        .expect("down");
    assert_eq!(reply.lines.len(), 1);
}

#[test]
fn bgp_03_a_command_is_one_line_and_a_path_one_bird_string() {
    let mut c = BirdCtl::new(Canned::new(b"0001 BIRD 2.0.12 ready.\n")).expect("welcome");
    assert!(matches!(
        c.command("show status\ndown"),
        Err(CtlError::Argument(..))
    ));
    let quoted = c.configure_check(Path::new("/tmp/a\"b.conf"));
    assert!(matches!(quoted, Err(CtlError::Argument(..))), "{quoted:?}");
    assert_eq!(sent(c), "");
}

/// A daemon that greets and then never answers: the command fails after TIMEOUT.
#[test]
fn bgp_03_a_silent_daemon_times_out() {
    let dir = std::env::temp_dir().join(format!("jn-birdctl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("bird.ctl");
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).expect("bind");
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.write_all(b"0001 BIRD 2.0.12 ready.\n").expect("greet");
        std::thread::sleep(TIMEOUT + Duration::from_secs(1));
    });
    let mut c = connect(&path).expect("connect");
    let started = Instant::now();
    let err = c.status().expect_err("times out");
    let took = started.elapsed();
    assert!(
        matches!(&err, CtlError::Io(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "{err:?}"
    );
    assert!(
        took >= TIMEOUT && took < TIMEOUT + Duration::from_secs(1),
        "{took:?}"
    );
    server.join().expect("server");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgp_03_no_socket_names_its_path() {
    let err = connect(Path::new("/nonexistent/jn/bird.ctl"))
        .err()
        .expect("fails");
    assert!(
        err.to_string().contains("/nonexistent/jn/bird.ctl"),
        "{err}"
    );
}
