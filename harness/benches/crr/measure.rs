//! What the connection-rate bench measures beside the rate: the programs' run time
//! from the kernel's statistics, the connection entries, the daemons' CPU, and the
//! per-connection breakdown.
use super::*;

/// Runs and run time (ns) of Juneau's programs on every Node together, by program
/// name, from the kernel's per-program statistics (the kernel keeps 15 characters of
/// a name). Only entry programs count runs: a tail call runs within its caller's run,
/// whose time includes it.
pub(super) fn program_stats() -> BTreeMap<String, (u64, u64)> {
    use std::os::fd::AsFd;
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for info in aya::programs::loaded_programs().flatten() {
        let Some(name) = info.name_as_str().map(str::to_owned) else {
            continue;
        };
        let Some(full) = juneau_common::prog_names::ALL
            .iter()
            .find(|p| p.starts_with(&name) && !name.is_empty())
        else {
            continue;
        };
        let Ok(fd) = info.fd() else { continue };
        let (runs, ns) = juneau::node::dataplane::run_stats(fd.as_fd());
        let e = out.entry(full.to_string()).or_default();
        e.0 += runs;
        e.1 += ns;
    }
    out
}

/// Connection-table entries on every Node that name one of `ports` (a breakdown
/// phase's source ports, which no other connection uses) on either side.
pub(super) fn ct_entries(ports: std::ops::Range<u16>) -> usize {
    let port_of = |a: &str| a.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
    NODES
        .iter()
        .map(|n| {
            dump_conntrack(&node_dir(n), &Filter::default())
                .map(|rows| {
                    rows.iter()
                        .filter(|r| {
                            [&r.src, &r.dst]
                                .iter()
                                .any(|a| port_of(a).is_some_and(|p| ports.contains(&p)))
                        })
                        .count()
                })
                .unwrap_or(0)
        })
        .sum()
}

/// User and system CPU time of the Nodes' daemons, in ns (`/proc/<pid>/stat`).
pub(super) fn daemons_cpu_ns(run: &Run) -> u64 {
    let tick = 1e9 / 100.0; // USER_HZ
    NODES
        .iter()
        .filter_map(|n| run.daemons.pid(n))
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<u64> = after
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
            ((f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 * tick)
                as u64
        })
        .sum()
}

/// What `BREAKDOWN` connections of one kind cost, per connection.
pub(super) struct Breakdown {
    pub(super) programs: Vec<(String, f64, f64)>,
    pub(super) ns_per_connection: f64,
    pub(super) entries: f64,
}

pub(super) fn breakdown(client: &Path, to: &[SocketAddr], phase: u16) -> Breakdown {
    let first = 61_000 + phase * BREAKDOWN as u16;
    let ports = first..first + BREAKDOWN as u16;
    let (before, entries) = (program_stats(), ct_entries(ports.clone()));
    let started = Instant::now();
    let failed = crr::client_n_from(client, to, BREAKDOWN, first);
    let wall = started.elapsed();
    let (after, entries_after) = (program_stats(), ct_entries(ports));
    assert_eq!(failed, 0, "connections failed in the breakdown");
    let n = BREAKDOWN as f64;
    let mut programs = Vec::new();
    let mut total = 0.0;
    for (name, (runs, ns)) in &after {
        let (r0, t0) = before.get(name).copied().unwrap_or_default();
        let (runs, ns) = (runs - r0, ns - t0);
        if runs == 0 {
            continue;
        }
        total += ns as f64 / n;
        programs.push((name.clone(), runs as f64 / n, ns as f64 / runs as f64));
    }
    println!(
        "  {BREAKDOWN} connections in {wall:?}: {total:.0} ns of programs per connection, {:+} entries",
        entries_after as i64 - entries as i64
    );
    for (name, runs, ns) in &programs {
        println!("    {name:<16} {runs:5.2} runs/conn  {ns:6.0} ns/run");
    }
    Breakdown {
        programs,
        ns_per_connection: total,
        entries: (entries_after as f64 - entries as f64) / n,
    }
}

pub(super) fn describe(b: &Breakdown) -> String {
    let progs: Vec<String> = b
        .programs
        .iter()
        .map(|(name, runs, ns)| format!("{name} {runs:.2} x {ns:.0} ns"))
        .collect();
    format!(
        "{:.0} ns of programs a connection ({}), {:.2} connection-table entries left a connection",
        b.ns_per_connection,
        progs.join(", "),
        b.entries
    )
}

/// Rounds of every bed in turn (rotated), `secs` each: each bed's rates, and its
/// failed connections.
pub(super) fn rounds_of(
    beds: &[(&PathBuf, &[SocketAddr])],
    rounds: usize,
    secs: f64,
) -> (Vec<Vec<f64>>, Vec<u64>) {
    let mut rates = vec![Vec::new(); beds.len()];
    let mut failed = vec![0u64; beds.len()];
    for round in 0..rounds {
        for i in (0..beds.len()).map(|j| (j + round) % beds.len()) {
            let r = crr::client(beds[i].0, beds[i].1, secs);
            rates[i].push(r.per_s);
            failed[i] += r.failed;
        }
    }
    (rates, failed)
}
