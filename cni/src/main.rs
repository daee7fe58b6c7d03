//! The thin CNI plugin: turns the CNI_* environment and the config on stdin into one
//! request to the node daemon, and prints the daemon's result or error (CNI 1.1.0).
use std::{io::Read, path::Path, process::ExitCode};

use juneau_cni::{
    self as cni, CniError, code,
    plugin::{self, Invocation},
};

fn run() -> Result<Option<String>, CniError> {
    let mut stdin = String::new();
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    if env("CNI_COMMAND") != "VERSION" {
        std::io::stdin().read_to_string(&mut stdin).map_err(|e| {
            CniError::new(
                code::IO_FAILURE,
                "cannot read the network configuration from stdin",
            )
            .details(e.to_string())
        })?;
    }
    match plugin::invocation(&env, &stdin)? {
        Invocation::Version(v) => Ok(Some(v)),
        Invocation::Call { socket, request } => {
            let result = cni::call(Path::new(&socket), &request)?;
            Ok(result.map(|r| serde_json::to_string(&r).expect("results serialize")))
        }
    }
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
