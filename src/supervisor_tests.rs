use super::*;

fn sh(name: &str, script: &str, ready: Ready) -> ProcessSpec {
    ProcessSpec {
        name: name.into(),
        what: format!("test {name}"),
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        netns: None,
        log: std::env::temp_dir().join(format!("jn-sup-{}-{name}.log", std::process::id())),
        ready,
        stop_signal: libc::SIGTERM,
        tied: true,
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "waited 20 s for {what}");
        std::thread::sleep(POLL);
    }
}

#[test]
fn a_process_that_exits_is_started_again_until_stopped() {
    let sup = Supervisor::new([sh("quits", "exit 3", Ready::Spawned)], false);
    sup.start("quits", Duration::from_secs(5)).unwrap();
    wait_for("three starts", || sup.starts("quits") >= 3);
    let events = sup.events.lock().unwrap().join("\n");
    assert!(events.contains("test quits (pid "), "{events}");
    assert!(events.contains("exit status: 3"), "{events}");
    sup.stop("quits");
    let after = sup.starts("quits");
    // Longer than the largest delay the three failures can have earned (400 ms).
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        sup.starts("quits"),
        after,
        "a stopped process stays stopped"
    );
    sup.shutdown();
}

#[test]
fn backoff_doubles_while_a_process_keeps_failing() {
    let sup = Supervisor::new([sh("fails", "exit 1", Ready::Spawned)], false);
    sup.start("fails", Duration::from_secs(5)).unwrap();
    let t0 = Instant::now();
    wait_for("five starts", || sup.starts("fails") >= 5);
    // Delays 100 + 200 + 400 + 800 ms between the five starts, at the least.
    assert!(
        t0.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    sup.shutdown();
}

#[test]
fn a_pid_file_process_is_up_when_it_names_itself_and_stops_on_its_signal() {
    let file = std::env::temp_dir().join(format!("jn-sup-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let script = format!("sleep 0.3; echo $$ > {}; exec sleep 60", file.display());
    let sup = Supervisor::new([sh("serves", &script, Ready::PidFile(file.clone()))], false);
    let pid = sup.start("serves", Duration::from_secs(10)).unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().trim(),
        pid.to_string()
    );
    assert_eq!(sup.pid("serves"), Some(pid));
    sup.stop("serves");
    assert_eq!(sup.pid("serves"), None);
    let events = sup.events.lock().unwrap().join("\n");
    assert!(
        events.contains("test serves stopped (signal: 15"),
        "{events}"
    );
    let _ = std::fs::remove_file(&file);
    sup.shutdown();
}

#[test]
fn a_child_of_a_thread_that_blocks_its_stop_signal_still_stops_on_it() {
    // As the daemon does: SIGTERM blocked in the thread that makes the supervisor
    // (its watcher inherits the mask).
    // SAFETY: a mask change of this test's own thread.
    unsafe {
        let mut term: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut term);
        libc::sigaddset(&mut term, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &term, std::ptr::null_mut());
    }
    let sup = Supervisor::new([sh("masked", "exec sleep 60", Ready::Spawned)], false);
    sup.start("masked", Duration::from_secs(5)).unwrap();
    sup.stop("masked");
    let events = sup.events.lock().unwrap().join("\n");
    assert!(
        events.contains("test masked stopped (signal: 15"),
        "{events}"
    );
    sup.shutdown();
}

#[test]
fn a_dropped_supervisor_ends_its_tied_processes() {
    let sup = Supervisor::new([sh("tied", "exec sleep 60", Ready::Spawned)], false);
    let pid = sup.start("tied", Duration::from_secs(5)).unwrap();
    drop(sup);
    // The watcher ends with its last owner; its children get their stop signal.
    wait_for("the tied process to end", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |s| s.split_whitespace().nth(2) == Some("Z"))
    });
}

#[test]
fn one_that_ignores_its_stop_signal_is_killed_after_the_grace_period() {
    // Up once the trap is in place: the pid file is written after it.
    let file = std::env::temp_dir().join(format!("jn-sup-{}-stubborn.pid", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 1; done",
        file.display()
    );
    let sup = Supervisor::new(
        [sh("stubborn", &script, Ready::PidFile(file.clone()))],
        false,
    );
    sup.start("stubborn", Duration::from_secs(10)).unwrap();
    sup.stop("stubborn");
    let _ = std::fs::remove_file(&file);
    let events = sup.events.lock().unwrap().join("\n");
    assert!(
        events.contains("test stubborn stopped (signal: 9"),
        "{events}"
    );
    sup.shutdown();
}

#[test]
fn unknown_and_unstartable_processes_are_errors_that_name_them() {
    let mut bad = sh("nothere", "", Ready::Spawned);
    bad.program = "/nonexistent/juneau-test".into();
    let sup = Supervisor::new([bad], false);
    let e = sup.start("nothere", Duration::from_secs(5)).unwrap_err();
    assert!(
        e.to_string().contains("test nothere: cannot start it"),
        "{e}"
    );
    let e = sup.start("other", Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, SupervisorError::Unknown(n) if n == "other"));
    sup.shutdown();
}
