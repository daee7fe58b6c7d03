//! `juneau webhook` as the API server calls it: serving HTTPS on the test's loopback
//! with a certificate of a CA of its own, registered by the webhook configurations of
//! `kind/webhook.yaml` (their Service reference replaced by this URL, their caBundle
//! by this CA). Stops with the value.
#![allow(dead_code)]
use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;

use crate::control_plane::{ControlPlane, Owned, ca, free_port, leaf};

/// The webhook configurations of `kind/webhook.yaml`, pointed at `base` with `ca_pem`.
pub fn configurations(base: &str, ca_pem: &str) -> String {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/kind/webhook.yaml")).unwrap();
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        if !kind.ends_with("WebhookConfiguration") {
            continue;
        }
        for hook in v["webhooks"].as_array_mut().unwrap() {
            let path = hook["clientConfig"]["service"]["path"]
                .as_str()
                .expect("the manifests reach the webhook through its Service, with a path")
                .to_owned();
            hook["clientConfig"] = serde_json::json!({
                "url": format!("{base}{path}"),
                "caBundle": bundle,
            });
        }
        out.push(v.to_string());
    }
    assert_eq!(
        out.len(),
        2,
        "kind/webhook.yaml: a validating and a mutating configuration"
    );
    out.join("\n")
}

pub struct Webhook {
    pub port: u16,
    pub log: std::path::PathBuf,
    _process: Owned,
}

/// Starts `juneau webhook` with `extra` flags (its files in `dir`), registers it, and
/// returns once the API server calls it.
pub fn start(cp: &ControlPlane, dir: &Path, extra: &[&str]) -> Webhook {
    std::fs::create_dir_all(dir).unwrap();
    let authority = ca("juneau-test-webhook-ca");
    let (crt, key) = leaf(
        &["127.0.0.1"],
        "juneau-webhook",
        None,
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        &authority,
    );
    std::fs::write(dir.join("tls.crt"), crt).unwrap();
    std::fs::write(dir.join("tls.key"), key).unwrap();
    let port = free_port();
    let log = dir.join("webhook.log");
    let process = Owned::spawn(
        Command::new(juneau::standalone::sibling_binary("juneau"))
            .args(["webhook", "--listen", &format!("127.0.0.1:{port}")])
            // What the fixture's kube-apiserver has as --service-cluster-ip-range.
            .args(["--service-cidr", "10.0.0.0/24"])
            .arg("--cert-file")
            .arg(dir.join("tls.crt"))
            .arg("--key-file")
            .arg(dir.join("tls.key"))
            .arg("--kubeconfig")
            .arg(&cp.kubeconfig)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap()),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "juneau webhook did not listen: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &configurations(&format!("https://127.0.0.1:{port}"), &authority.0.pem()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The configurations take effect within a moment: wait until the webhook answers a
    // dry run.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = cp.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"],
            "apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {name: probe}\nspec: {vpc: ''}\n",
        );
        if String::from_utf8_lossy(&out.stderr).contains("admission webhook") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the webhook configurations never took effect"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    Webhook {
        port,
        log,
        _process: process,
    }
}
