//! The test control plane's kubeconfigs: the admin's, a ServiceAccount token's, a
//! kubelet's Node certificate, each possibly reaching the API server by a relay.
use std::path::{Path, PathBuf};

use rcgen::ExtendedKeyUsagePurpose;

use super::{ControlPlane, leaf};

impl ControlPlane {
    /// A kubeconfig that authenticates with `token` (a ServiceAccount's, from
    /// `kubectl create token`) instead of the admin certificate.
    pub fn kubeconfig_for_token(&self, name: &str, token: &str) -> PathBuf {
        self.kubeconfig_for_token_via(name, token, &self.server())
    }

    /// [`ControlPlane::kubeconfig_for_token`] reaching the API at `server` (a relay into
    /// a Node's namespace; the serving certificate names 127.0.0.1 and localhost).
    pub fn kubeconfig_for_token_via(&self, name: &str, token: &str, server: &str) -> PathBuf {
        let path = self.dir.join(format!("kubeconfig-{name}"));
        std::fs::write(
            &path,
            kubeconfig_text(
                server,
                &self.certs().join("ca.crt"),
                name,
                &format!("token: {token}"),
            ),
        )
        .unwrap();
        path
    }

    /// A kubelet's kubeconfig for Node `node`, reaching the API at `server`: a client
    /// certificate `system:node:<node>` in `system:nodes`, as kubeadm gives a Node
    /// (the Node authorizer's and NodeRestriction's user).
    pub fn node_kubeconfig_via(&self, node: &str, server: &str) -> PathBuf {
        let (crt, key) = leaf(
            &[],
            &format!("system:node:{node}"),
            Some("system:nodes"),
            ExtendedKeyUsagePurpose::ClientAuth,
            &self.client_ca,
        );
        let certs = self.dir.join("certs");
        let (crt_path, key_path) = (
            certs.join(format!("node-{node}.crt")),
            certs.join(format!("node-{node}.key")),
        );
        std::fs::write(&crt_path, crt).unwrap();
        std::fs::write(&key_path, key).unwrap();
        let path = self.dir.join(format!("kubeconfig-node-{node}"));
        std::fs::write(
            &path,
            kubeconfig_text(
                server,
                &certs.join("ca.crt"),
                node,
                &format!(
                    "client-certificate: {}\n    client-key: {}",
                    crt_path.display(),
                    key_path.display()
                ),
            ),
        )
        .unwrap();
        path
    }

    /// The admin kubeconfig reaching the API at `server` (a relay the test controls).
    pub fn kubeconfig_via(&self, name: &str, server: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.kubeconfig)
            .unwrap()
            .replace(&self.server(), server);
        let path = self.dir.join(format!("kubeconfig-{name}"));
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// A kubeconfig for `server` (verified by `ca`) as `user`, whose `credentials` are the
/// lines under `user:` (`token: ...`, or a client certificate and key).
pub fn kubeconfig_text(server: &str, ca: &Path, user: &str, credentials: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {server}\n    \
         certificate-authority: {ca}\nusers:\n- name: {user}\n  user:\n    {credentials}\n\
         contexts:\n- name: t\n  context: {{cluster: t, user: {user}}}\ncurrent-context: t\n",
        ca = ca.display()
    )
}
