//! What the integration tests share.
#![allow(dead_code)]

pub mod streams;

/// `kubectl-juneau <args> -o json`, which must succeed; its JSON.
pub fn kubectl_juneau_json(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-juneau"))
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl-juneau {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Pod `name` in namespace default on `node`, with `annotations` (full keys), as a
/// kubelet would start it.
pub fn pod_def(name: &str, node: &str, annotations: &[(&str, &str)]) -> juneau::standalone::PodDef {
    juneau::standalone::PodDef {
        name: name.into(),
        namespace: "default".into(),
        node: node.into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        labels: Default::default(),
        ports: Default::default(),
        segment: None,
        addresses: Vec::new(),
        bridge_hosts: Vec::new(),
    }
}

/// `n` bytes of a deterministic stream (xorshift), so a receiver checks every one.
pub fn stream(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// SIGKILL of `node`'s daemon (its supervisor starts it again); the killed pid.
pub fn sigkill_daemon(run: &juneau::standalone::Run, node: &str) -> u32 {
    let old = run.daemons.pid(node).expect("a running daemon");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    old
}

/// Waits until `node`'s daemon is a process other than `old`, and serves; its pid.
pub fn wait_restarted(run: &juneau::standalone::Run, node: &str, old: u32) -> u32 {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(p) = run.daemons.pid(node).filter(|p| *p != old) {
            run.daemons
                .wait_ready(node, Duration::from_secs(20))
                .unwrap();
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon was not started again"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
