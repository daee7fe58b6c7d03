use super::*;

fn run() -> Run {
    Run {
        dir: "/run/juneau/r1/frr".into(),
        pathspace: "jn-r1".into(),
        listen: Ipv4Addr::new(10, 99, 0, 254),
        log: Log::Stdout,
    }
}

fn common(d: &str) -> Vec<String> {
    format!(
        "-f /run/juneau/r1/frr/{d}.conf -i /run/juneau/r1/frr/{d}.pid \
         -z /run/juneau/r1/frr/zserv.api --vty_socket /run/juneau/r1/frr -N jn-r1 \
         -u root -g frrvty -A 127.0.0.1 -P 0 --log stdout"
    )
    .split(' ')
    .map(String::from)
    .collect()
}

#[test]
fn bgp_01_frr_daemons_start_zebra_then_bfdd_then_bgpd_with_every_path_in_the_run() {
    let lines = run().command_lines();
    let order: Vec<_> = lines.iter().map(|l| l.daemon).collect();
    assert_eq!(order, [Daemon::Zebra, Daemon::Bfdd, Daemon::Bgpd]);

    assert_eq!(lines[0].program, Path::new("/usr/lib/frr/zebra"));
    assert_eq!(lines[0].args, common("zebra"));

    let mut bfdd = common("bfdd");
    bfdd.extend(["--bfdctl".into(), "/run/juneau/r1/frr/bfdd.sock".into()]);
    assert_eq!(lines[1].args, bfdd);

    let mut bgpd = common("bgpd");
    bgpd.extend(["-l".into(), "10.99.0.254".into()]);
    assert_eq!(lines[2].args, bgpd);
    assert_eq!(lines[2].pid_file, Path::new("/run/juneau/r1/frr/bgpd.pid"));
    assert_eq!(
        lines[2].vty_socket,
        Path::new("/run/juneau/r1/frr/bgpd.vty")
    );

    for l in &lines {
        for a in l.args.iter().filter(|a| a.starts_with('/')) {
            assert!(a.starts_with("/run/juneau/r1/frr"), "{a} outside the run");
        }
    }
}

#[test]
fn bgp_01_a_log_file_is_passed_as_file_colon_path() {
    let r = Run {
        log: Log::File("/tmp/x/zebra.log".into()),
        ..run()
    };
    let args = r.command_line(Daemon::Zebra).args;
    let i = args.iter().position(|a| a == "--log").expect("--log");
    assert_eq!(args[i + 1], "file:/tmp/x/zebra.log");
}

#[test]
fn bgp_01_ready_only_when_the_pid_file_names_the_spawned_pid() {
    let dir = std::env::temp_dir().join(format!("bgp-frr-ready-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let f = dir.join("zebra.pid");
    assert!(!ready(&f, 42), "no file");
    std::fs::write(&f, "41\n").expect("write");
    assert!(!ready(&f, 42), "a stale file of another pid");
    std::fs::write(&f, "42\n").expect("write");
    assert!(ready(&f, 42));
    std::fs::write(&f, "garbage").expect("write");
    assert!(!ready(&f, 42));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
