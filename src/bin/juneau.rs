//! `juneau`: the standalone mode and the tools around the API.
use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "juneau",
    about = "Juneau: VPC-style networking for Kubernetes with an eBPF datapath"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the whole stack on this machine (embedded store, one daemon per Node
    /// namespace, the real CNI binary per Pod) from a scenario file.
    Standalone {
        #[arg(long)]
        scenario: PathBuf,
        /// Tear everything down after the checks instead of waiting for Ctrl-C.
        #[arg(long)]
        once: bool,
    },
    /// Print the CustomResourceDefinitions (what kind/crds.yaml holds).
    Crds,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Standalone { scenario, once } => {
            match juneau::standalone::run(&scenario, once, &mut |line| println!("{line}")) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("juneau standalone: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Crds => {
            print!("{}", juneau::api::crds_yaml());
            ExitCode::SUCCESS
        }
    }
}
