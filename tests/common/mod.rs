//! What the integration tests share.

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
