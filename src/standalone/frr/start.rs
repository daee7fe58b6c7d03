//! Brings up the outside's upstream router as a BGP speaker (`outside: {bgp: {}}`):
//! its files from the scenario's BGPPeer at the upstream's address, the namespace's
//! ECMP settings, then zebra, bfdd and bgpd in order, each a tied process of the
//! run's supervisor (they die with the run).
use std::{net::Ipv4Addr, path::Path, sync::Arc};

use super::{
    conf::{self, BfdProfile, Neighbor, Timers, Upstream},
    procs::{self, Log},
};
use crate::{
    api::BGPPeer,
    netns::Owned,
    standalone::{StandaloneError, topology::UPSTREAM_IP},
    supervisor::{ProcessSpec, Ready, Supervisor},
};

/// The multipath hash seed of the upstream's namespace: a fixed one makes the spread
/// of flows over the Nodes the same every run (100 source ports: 31/30/39 over three
/// Nodes with this one, measured; the random default gave 19/41/40 once).
const HASH_SEED: u32 = 12345;

/// What the upstream is told, from the BGPPeer whose `peerAddress` is its own.
pub fn upstream(peers: &[BGPPeer], nodes: &[Ipv4Addr]) -> Result<Upstream, StandaloneError> {
    let peer = peers
        .iter()
        .find(|p| p.spec.address() == Some(UPSTREAM_IP))
        .ok_or_else(|| {
            StandaloneError::Scenario(format!(
                "outside.bgp: no BGPPeer has peerAddress {UPSTREAM_IP} (the upstream router): add one"
            ))
        })?;
    let hold = u16::try_from(peer.spec.hold()).unwrap_or(90);
    Ok(Upstream {
        hostname: "upstream".into(),
        local_as: peer.spec.peer_asn,
        router_id: UPSTREAM_IP,
        neighbors: nodes
            .iter()
            .map(|&address| Neighbor {
                address,
                remote_as: peer.spec.my_asn,
            })
            .collect(),
        bfd: peer.spec.bfd_timers().map(|t| BfdProfile {
            interval_ms: t.interval_ms,
            multiplier: u8::try_from(t.multiplier).unwrap_or(3),
        }),
        timers: Timers {
            keepalive: hold / 3,
            hold,
            ..Timers::default()
        },
        graceful_restart: true,
    })
}

/// Writes the files into `dir`, sets the namespace's multipath hashing, and starts the
/// three daemons in `ns`.
pub fn bring_up(
    processes: &Arc<Supervisor>,
    dir: &Path,
    ns: &Owned,
    pathspace: &str,
    up: &Upstream,
) -> Result<(), StandaloneError> {
    std::fs::create_dir_all(dir)?;
    for (file, text) in [
        ("zebra.conf", conf::zebra_conf(up)),
        ("bfdd.conf", conf::bfdd_conf(up)),
        ("bgpd.conf", conf::bgpd_conf(up)),
    ] {
        std::fs::write(dir.join(file), text)?;
    }
    // Per-namespace settings, in the upstream's namespace only: an L4 hash, or one
    // client and one ElasticIP always take one Node.
    for setting in [
        "net.ipv4.fib_multipath_hash_policy=1".to_owned(),
        format!("net.ipv4.fib_multipath_hash_seed={HASH_SEED}"),
        "net.ipv4.fib_multipath_use_neigh=1".to_owned(),
    ] {
        ns.exec(&["sysctl", "-qw", &setting])
            .map_err(StandaloneError::Scenario)?;
    }
    let run = procs::Run {
        dir: dir.to_owned(),
        pathspace: pathspace.to_owned(),
        listen: UPSTREAM_IP,
        log: Log::Stdout,
    };
    for line in run.command_lines() {
        let name = format!("frr-{}", line.daemon.name());
        processes.add(ProcessSpec {
            name: name.clone(),
            what: format!("upstream: {}", line.daemon.name()),
            program: line.program,
            args: line.args,
            netns: Some(ns.path().to_owned()),
            log: dir.join(format!("{}.log", line.daemon.name())),
            ready: Ready::PidFile(line.pid_file),
            stop_signal: libc::SIGTERM,
            tied: true,
        });
        processes.start(&name, std::time::Duration::from_secs(10))?;
    }
    Ok(())
}

/// What FRR leaves outside the run's folder whatever it is told (FRR 8.4.4): the
/// pathspace's folder and each daemon's crash-log folder.
pub fn remove_leftovers(pathspace: &str, pids: &[u32]) {
    let _ = std::fs::remove_dir_all(Path::new("/var/run/frr").join(pathspace));
    for pid in pids {
        for d in ["zebra", "bfdd", "bgpd"] {
            let _ = std::fs::remove_dir_all(Path::new("/var/tmp/frr").join(format!("{d}.{pid}")));
        }
    }
}
