//! What the thin plugin makes of its inputs: the CNI_* environment and the network
//! configuration on stdin turn into one request to the node daemon (or the VERSION
//! answer). Pure, so that the same code is tested and fuzzed with arbitrary inputs.
use super::{CniError, NetConf, Request, SUPPORTED_VERSIONS, VERSION, code, parse_args};

/// What one plugin invocation does.
#[derive(Debug)]
pub enum Invocation {
    /// VERSION: printed, nothing sent.
    Version(String),
    /// Any other command: one request to the daemon at `socket`.
    Call {
        socket: String,
        request: Box<Request>,
    },
}

/// Reads an invocation from `env` (unset variables read as empty) and `stdin`.
pub fn invocation(env: &dyn Fn(&str) -> String, stdin: &str) -> Result<Invocation, CniError> {
    let command = env("CNI_COMMAND");
    if command == "VERSION" {
        let v =
            serde_json::json!({ "cniVersion": VERSION, "supportedVersions": SUPPORTED_VERSIONS });
        return Ok(Invocation::Version(v.to_string()));
    }
    let config: NetConf = serde_json::from_str(stdin).map_err(|e| {
        if e.is_data() {
            // Well-formed JSON with a field missing or of the wrong type: the
            // configuration is wrong, not its encoding.
            CniError::new(
                code::INVALID_CONFIG,
                format!(
                    "the network configuration: {e}; fix the CNI configuration (the file in /etc/cni/net.d, or the NetworkAttachmentDefinition a meta plugin reads)"
                ),
            )
        } else {
            CniError::new(
                code::DECODE_FAILURE,
                "the network configuration is not valid JSON",
            )
            .details(e.to_string())
        }
    })?;
    if !SUPPORTED_VERSIONS.contains(&config.cni_version.as_str()) {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!(
                "cniVersion {:?} is not supported; use 1.1.0",
                config.cni_version
            ),
        ));
    }
    let need = |name: &str| {
        let v = env(name);
        if v.is_empty() {
            Err(CniError::new(
                code::INVALID_ENV,
                format!("{name} is not set"),
            ))
        } else {
            Ok(v)
        }
    };
    let (container_id, netns, ifname) = match command.as_str() {
        "ADD" | "CHECK" => (
            need("CNI_CONTAINERID")?,
            need("CNI_NETNS")?,
            need("CNI_IFNAME")?,
        ),
        "DEL" => (
            need("CNI_CONTAINERID")?,
            env("CNI_NETNS"),
            env("CNI_IFNAME"),
        ),
        "GC" | "STATUS" => (String::new(), String::new(), String::new()),
        other => {
            return Err(CniError::new(
                code::INVALID_ENV,
                format!("CNI_COMMAND {other:?} is not one of ADD, DEL, CHECK, GC, STATUS, VERSION"),
            ));
        }
    };
    let socket = config
        .socket
        .clone()
        .unwrap_or_else(|| super::DEFAULT_SOCKET.into());
    let request = Request {
        command,
        container_id,
        netns,
        ifname,
        args: parse_args(&env("CNI_ARGS")),
        config,
    };
    Ok(Invocation::Call {
        socket,
        request: Box::new(request),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn with(vars: &[(&str, &str)], stdin: &str) -> Result<Invocation, CniError> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        invocation(&|k| vars.get(k).cloned().unwrap_or_default(), stdin)
    }

    const CONF: &str = r#"{"cniVersion":"1.1.0","name":"juneau","type":"juneau-cni"}"#;

    #[test]
    fn mx_01_add_reads_the_kubelet_args_and_the_default_socket() {
        let inv = with(
            &[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", "c1"),
                ("CNI_NETNS", "/run/netns/x"),
                ("CNI_IFNAME", "eth0"),
                (
                    "CNI_ARGS",
                    "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=a=b",
                ),
            ],
            CONF,
        )
        .unwrap();
        let Invocation::Call { socket, request } = inv else {
            panic!("ADD must call the daemon")
        };
        assert_eq!(socket, crate::DEFAULT_SOCKET);
        assert_eq!(request.args["K8S_POD_NAME"], "a=b");
        assert_eq!(request.args["K8S_POD_NAMESPACE"], "default");
    }

    #[test]
    fn mx_01_add_without_a_netns_names_the_variable() {
        let e = with(
            &[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", "c1"),
                ("CNI_IFNAME", "eth0"),
            ],
            CONF,
        )
        .unwrap_err();
        assert_eq!(e.code, code::INVALID_ENV);
        assert_eq!(e.msg, "CNI_NETNS is not set");
    }

    #[test]
    fn mx_01_an_old_version_and_bad_json_get_their_codes() {
        let e = with(
            &[("CNI_COMMAND", "DEL")],
            r#"{"cniVersion":"0.3.1","name":"j","type":"juneau-cni"}"#,
        )
        .unwrap_err();
        assert_eq!(e.code, code::INCOMPATIBLE_VERSION);
        let e = with(&[("CNI_COMMAND", "DEL")], "{").unwrap_err();
        assert_eq!(e.code, code::DECODE_FAILURE);
        let e = with(
            &[("CNI_COMMAND", "DEL")],
            r#"{"name":"j","type":"juneau-cni"}"#,
        )
        .unwrap_err();
        assert_eq!(e.code, code::INVALID_CONFIG);
        assert!(e.msg.contains("missing field `cniVersion`"), "{}", e.msg);
    }
}
