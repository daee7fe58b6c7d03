//! Asking a running upstream (its vty sockets in the run's `frr/` folder) what it
//! installed and which BFD sessions are up: what the BGP tests and benchmarks poll.
use std::{net::Ipv4Addr, path::Path, process::Command};

use super::routes::installed_next_hops;

/// `vtysh --vty_socket <dir> -c <command>`'s output; empty when it cannot run.
pub fn vtysh(dir: &Path, command: &str) -> String {
    Command::new("vtysh")
        .arg("--vty_socket")
        .arg(dir)
        .args(["-c", command])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// The next hops of `prefix` the upstream installed in the kernel (zebra's FIB view).
pub fn fib_next_hops(dir: &Path, prefix: &str) -> Vec<Ipv4Addr> {
    installed_next_hops(&vtysh(dir, &format!("show ip route {prefix} json")), prefix)
        .map(|hops| {
            hops.into_iter()
                .filter(|h| h.fib)
                .filter_map(|h| h.address)
                .collect()
        })
        .unwrap_or_default()
}

/// The upstream's BFD sessions that are up.
pub fn bfd_up(dir: &Path) -> usize {
    vtysh(dir, "show bfd peers brief")
        .lines()
        .filter(|l| l.split_whitespace().last() == Some("up"))
        .count()
}
