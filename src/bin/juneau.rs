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
        /// Seconds after which a learned MAC without frames expires (L2-30).
        #[arg(long, default_value_t = 300)]
        fdb_aging: u64,
    },
    /// Print the CustomResourceDefinitions (what kind/crds.yaml holds).
    Crds,
    /// Run the L2Network controller against the cluster in the kubeconfig / service
    /// account (kube-rs).
    Controller {
        /// MTU of L2Networks that do not set one (1500 underlay less 50 of VXLAN).
        #[arg(long, default_value_t = 1450)]
        default_l2_mtu: u32,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Standalone {
            scenario,
            once,
            fdb_aging,
        } => {
            let aging = std::time::Duration::from_secs(fdb_aging);
            match juneau::standalone::run_with(&scenario, once, aging, &mut |line| {
                println!("{line}")
            }) {
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
        Cmd::Controller { default_l2_mtu } => {
            let cfg = juneau::controller::Config { default_l2_mtu };
            let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
            rt.block_on(async {
                match kube::Client::try_default().await {
                    Ok(client) => {
                        juneau::controller::kube::run(client, cfg).await;
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("juneau controller: no Kubernetes API reachable ({e}); use `juneau standalone` on a machine without one");
                        ExitCode::FAILURE
                    }
                }
            })
        }
    }
}
