//! What the integration tests share.
#![allow(dead_code)]

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
