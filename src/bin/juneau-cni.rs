//! The thin CNI plugin: turns the CNI_* environment and the config on stdin into one
//! request to the node daemon, and prints the daemon's result or error (CNI 1.1.0).
use std::{io::Read, path::Path, process::ExitCode};

use juneau::cni::{self, CniError, NetConf, Request, code};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn run() -> Result<Option<String>, CniError> {
    let command = env("CNI_COMMAND");
    if command == "VERSION" {
        let v = serde_json::json!({ "cniVersion": cni::VERSION, "supportedVersions": cni::SUPPORTED_VERSIONS });
        return Ok(Some(v.to_string()));
    }
    let mut stdin = String::new();
    std::io::stdin().read_to_string(&mut stdin).map_err(|e| {
        CniError::new(
            code::IO_FAILURE,
            "cannot read the network configuration from stdin",
        )
        .details(e.to_string())
    })?;
    let config: NetConf = serde_json::from_str(&stdin).map_err(|e| {
        CniError::new(
            code::DECODE_FAILURE,
            "the network configuration is not valid JSON",
        )
        .details(e.to_string())
    })?;
    if !cni::SUPPORTED_VERSIONS.contains(&config.cni_version.as_str()) {
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
        .unwrap_or_else(|| cni::DEFAULT_SOCKET.into());
    let req = Request {
        command: command.clone(),
        container_id,
        netns,
        ifname,
        args: cni::parse_args(&env("CNI_ARGS")),
        config,
    };
    let result = cni::call(Path::new(&socket), &req)?;
    Ok(result.map(|r| serde_json::to_string(&r).expect("results serialize")))
}

fn main() -> ExitCode {
    match run() {
        Ok(Some(out)) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            println!("{}", serde_json::to_string(&e).expect("errors serialize"));
            ExitCode::FAILURE
        }
    }
}
