//! CNI spec 1.1.0: the network configuration, results and errors, and the wire format
//! between the thin `juneau-cni` plugin and the node daemon (one JSON request and one
//! JSON response per connection on a unix socket).
use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    os::unix::net::UnixStream,
    path::Path,
};

use serde::{Deserialize, Serialize};

/// Versions this plugin speaks.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["0.4.0", "1.0.0", "1.1.0"];
pub const VERSION: &str = "1.1.0";
/// Where the daemon listens unless the network configuration says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/juneau/cni.sock";

pub mod plugin;

/// CNI error codes (spec section "Error").
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const UNSUPPORTED_FIELD: u32 = 2;
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENV: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODE_FAILURE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const TRY_AGAIN_LATER: u32 = 11;
    pub const NOT_AVAILABLE: u32 = 50;
}

/// The network configuration on the plugin's stdin (the fields Juneau reads).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    pub cni_version: String,
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    /// The node daemon's socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// A NetworkAttachmentDefinition's config naming the NIC's network (MX-04): the
    /// call is Multus' for the one interface `CNI_IFNAME` names, which the Pod lists on
    /// that L2Network (or Subnet) in `juneau.loutres.me/networks`. The cluster
    /// network's conflist names none: its call handles the Pod's other NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_network: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    /// GC: the attachments that must be kept.
    #[serde(
        default,
        rename = "cni.dev/valid-attachments",
        skip_serializing_if = "Option::is_none"
    )]
    pub valid_attachments: Option<Vec<Attachment>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_result: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

/// What the plugin forwards to the daemon: the CNI_* environment and the config.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Request {
    pub command: String,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    /// CNI_ARGS as key/value pairs (K8S_POD_NAMESPACE, K8S_POD_NAME, ...).
    pub args: BTreeMap<String, String>,
    pub config: NetConf,
}

/// A CNI error, as printed on stdout with a non-zero exit.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, thiserror::Error)]
#[error("CNI error {code}: {msg}{}", if details.is_empty() { String::new() } else { format!(" ({details})") })]
pub struct CniError {
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Self {
            cni_version: VERSION.into(),
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn details(mut self, d: impl Into<String>) -> Self {
        self.details = d.into();
        self
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct IpConfig {
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    pub interface: usize,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct RouteConfig {
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
}

/// The result of ADD (and the `prevResult` of CHECK / DEL).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CniResult {
    pub cni_version: String,
    pub interfaces: Vec<Interface>,
    pub ips: Vec<IpConfig>,
    pub routes: Vec<RouteConfig>,
    pub dns: serde_json::Value,
}

/// The daemon's answer.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Response {
    Ok(Option<CniResult>),
    Error(CniError),
}

/// Parses `CNI_ARGS` (`K=V;K=V`).
pub fn parse_args(s: &str) -> BTreeMap<String, String> {
    s.split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Sends one request to the daemon and reads its answer.
pub fn call(socket: &Path, req: &Request) -> Result<Option<CniResult>, CniError> {
    let unavailable = |e: std::io::Error| {
        CniError::new(
            code::TRY_AGAIN_LATER,
            format!("cannot reach the node daemon at {}", socket.display()),
        )
        .details(format!("{e}; is the juneau daemon running on this Node?"))
    };
    let mut conn = UnixStream::connect(socket).map_err(unavailable)?;
    // An ADD waits for the controller (10 s) and then plumbs; a daemon that answers
    // nothing for this long is stuck, and the runtime should retry.
    conn.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .map_err(unavailable)?;
    let mut line = serde_json::to_vec(req).expect("requests serialize");
    line.push(b'\n');
    conn.write_all(&line).map_err(unavailable)?;
    let mut answer = String::new();
    BufReader::new(conn)
        .read_line(&mut answer)
        .map_err(unavailable)?;
    if answer.trim().is_empty() {
        // The daemon went away mid-request (a restart): nothing is known to be done.
        return Err(CniError::new(
            code::TRY_AGAIN_LATER,
            format!(
                "the node daemon at {} closed the connection without an answer",
                socket.display()
            ),
        )
        .details("it may have restarted; try again"));
    }
    match serde_json::from_str(&answer) {
        Ok(Response::Ok(r)) => Ok(r),
        Ok(Response::Error(e)) => Err(e),
        Err(e) => Err(CniError::new(
            code::DECODE_FAILURE,
            "the node daemon sent an unreadable answer",
        )
        .details(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mx_01_results_and_errors_have_the_spec_shape() {
        let r = CniResult {
            cni_version: VERSION.into(),
            interfaces: vec![Interface {
                name: "eth1".into(),
                mac: "02:00:00:00:00:01".into(),
                mtu: Some(1450),
                sandbox: Some("/run/netns/p".into()),
            }],
            ips: vec![IpConfig {
                address: "10.7.0.2/24".into(),
                gateway: None,
                interface: 0,
            }],
            routes: vec![],
            dns: serde_json::json!({}),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["cniVersion"], "1.1.0");
        assert_eq!(v["interfaces"][0]["sandbox"], "/run/netns/p");
        assert_eq!(v["ips"][0]["interface"], 0);
        let e = serde_json::to_value(CniError::new(code::INVALID_ENV, "x").details("y")).unwrap();
        assert_eq!(
            e,
            serde_json::json!({"cniVersion": "1.1.0", "code": 4, "msg": "x", "details": "y"})
        );
        assert_eq!(
            parse_args("IgnoreUnknown=1;K8S_POD_NAME=a")["K8S_POD_NAME"],
            "a"
        );
    }
}
