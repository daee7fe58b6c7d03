//! `kubectl juneau`: inspect a Node's datapath.
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use juneau::cli;

#[derive(Parser)]
#[command(name = "kubectl-juneau", about = "Inspect Juneau's datapath")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// eBPF maps.
    Bpf {
        #[command(subcommand)]
        command: BpfCmd,
    },
}

#[derive(Subcommand)]
enum BpfCmd {
    /// Dump a map: l2_fdb (needs --inner-key vni=N) or drops.
    Dump {
        map: String,
        /// The Node whose pinned maps to read.
        #[arg(long)]
        node: String,
        /// For map-of-maps: which inner table (`vni=<N>`).
        #[arg(long)]
        inner_key: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

fn run() -> Result<(), cli::CliError> {
    let Cmd::Bpf {
        command:
            BpfCmd::Dump {
                map,
                node,
                inner_key,
                output,
            },
    } = Cli::parse().command;
    let dir = cli::node_dir(&node);
    match map.trim_start_matches("jn_") {
        "l2_fdb" => {
            let key = inner_key.ok_or_else(|| {
                cli::CliError::Usage(
                    "l2_fdb holds one table per segment: add --inner-key vni=<VNI>".into(),
                )
            })?;
            let rows = cli::dump_fdb(&dir, cli::parse_inner_key(&key)?)?;
            match output {
                Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&rows).expect("rows serialize")
                ),
                Output::Table => {
                    println!("{:<18} {:>8} {:<16} {:>4}", "MAC", "IFINDEX", "VTEP", "AGE");
                    for r in rows {
                        println!(
                            "{:<18} {:>8} {:<16} {:>3}s",
                            r.mac,
                            r.ifindex,
                            if r.vtep.is_empty() { "-" } else { &r.vtep },
                            r.age_seconds
                        );
                    }
                }
            }
        }
        "drops" => {
            let rows = cli::dump_drops(&dir)?;
            match output {
                Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&rows).expect("rows serialize")
                ),
                Output::Table => {
                    println!("{:<16} {:>10}", "REASON", "COUNT");
                    for (r, n) in rows {
                        println!("{r:<16} {n:>10}");
                    }
                }
            }
        }
        other => {
            return Err(cli::CliError::Usage(format!(
                "unknown map {other:?}: l2_fdb or drops"
            )));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubectl-juneau: {e}");
            ExitCode::FAILURE
        }
    }
}
