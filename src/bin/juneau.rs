//! `juneau`: the Node daemon, the controller, the standalone mode and the tools around
//! the API.
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
    /// The Node daemon (what the DaemonSet runs): loads and pins the datapath, adopts a
    /// previous daemon's, serves the CNI plugin, writes NetworkEndpoints, ages the
    /// learning tables, serves /metrics. Runs in the Node's network namespace until
    /// SIGTERM; the datapath stays attached after it exits.
    Node(Box<juneau::node::settings::NodeArgs>),
    /// Run the whole stack on this machine (embedded store, one daemon per Node
    /// namespace, the real CNI binary per Pod) from a scenario file.
    Standalone {
        #[arg(long, required_unless_present = "cleanup")]
        scenario: Option<PathBuf>,
        /// Tear everything down after the checks instead of waiting for Ctrl-C.
        #[arg(long)]
        once: bool,
        /// Seconds after which a learned MAC without frames expires (L2-30).
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
        fdb_aging: u64,
        /// Only remove what runs killed before they could tear down left behind
        /// (their namespaces, sockets and pins, by name), then exit.
        #[arg(long)]
        cleanup: bool,
    },
    /// Print the CustomResourceDefinitions (what kind/crds.yaml holds).
    Crds,
    /// The admission webhook over HTTPS (`/validate`, `/mutate`), reading the cluster
    /// through the Kubernetes API. The certificate files are read again when they change
    /// (a rotated Secret).
    Webhook {
        #[arg(long, default_value = "0.0.0.0:9443")]
        listen: std::net::SocketAddr,
        /// PEM certificate chain.
        #[arg(long)]
        cert_file: PathBuf,
        /// PEM private key.
        #[arg(long)]
        key_file: PathBuf,
        /// The cluster's Service CIDR (kube-apiserver --service-cluster-ip-range);
        /// repeat for several. L2Networks may not overlap it (L2-08).
        #[arg(long = "service-cidr")]
        service_cidrs: Vec<ipnet::Ipv4Net>,
        /// The API's kubeconfig [default: KUBECONFIG, ~/.kube/config, or the Pod's
        /// service account].
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Rewrite the httpGet and tcpSocket probes of Pods that have no route from
        /// their Node (eth0 on an L2Network or on another Vpc's Subnet, L2-27) into
        /// probes the Node's daemon runs inside the Pod (its `--probe-addr`).
        #[arg(long)]
        enable_probe_rewrite: bool,
        /// The daemons' probe port (`juneau node --probe-addr 127.0.0.1:<port>`).
        #[arg(long, default_value_t = juneau::admission::probes::PROBE_PORT)]
        probe_port: u16,
    },
    /// The BGP speaker of the DaemonSet's speaker container: waits for the daemon's
    /// first `bird.conf` in `--dir`, then becomes BIRD (with graceful restart).
    Speaker {
        /// The daemon's speaker folder (its run folder's `bgp/`).
        #[arg(long, default_value = "/run/juneau/bgp")]
        dir: PathBuf,
    },
    /// Run every reconciler (L2Network VNIs and status, Pod NICs and IPAM, RouteTables)
    /// against the Kubernetes API until SIGTERM: a pass after every change (watched).
    Controller(juneau::controller::command::ControllerArgs),
}

/// Logs to stderr; `JUNEAU_LOG` (an EnvFilter, e.g. `debug` or `juneau::node=debug`)
/// overrides the command's default level.
fn init_logs(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("JUNEAU_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Node(args) => {
            init_logs("info");
            juneau::node::settings::main(*args)
        }
        Cmd::Speaker { dir } => {
            let e = juneau::features::bgp::feature::exec_speaker(&dir);
            eprintln!(
                "juneau speaker: cannot run {}: {e}",
                juneau::features::bgp::feature::BIRD
            );
            ExitCode::FAILURE
        }
        Cmd::Standalone {
            scenario,
            once,
            fdb_aging,
            cleanup,
        } => {
            init_logs("warn");
            if cleanup {
                let removed = juneau::standalone::cleanup::dead_runs(&mut |l| println!("{l}"));
                println!("cleanup: {removed} dead run(s) removed");
                return ExitCode::SUCCESS;
            }
            let scenario = scenario.expect("clap requires --scenario without --cleanup");
            let aging = std::time::Duration::from_secs(fdb_aging);
            // A reader that went away (a closed pipe) must not stop the teardown.
            let mut say = |line: String| {
                use std::io::Write;
                let _ = writeln!(std::io::stdout(), "{line}");
            };
            match juneau::standalone::run_with(&scenario, once, aging, &mut say) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("juneau standalone: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Webhook {
            listen,
            cert_file,
            key_file,
            service_cidrs,
            kubeconfig,
            enable_probe_rewrite,
            probe_port,
        } => {
            init_logs("info");
            let cluster = match juneau::store::k8s::KubeCluster::connect(
                kubeconfig.as_deref(),
                juneau::store::k8s::CONTROLLER,
            ) {
                Ok(c) => c.with_service_cidrs(service_cidrs),
                Err(e) => {
                    eprintln!("juneau webhook: {e}");
                    return ExitCode::FAILURE;
                }
            };
            // Kept here so that the cluster (and its runtime) is dropped outside the
            // server's runtime, whatever ends the server.
            let cluster = std::sync::Arc::new(cluster);
            let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
            let served = rt.block_on(juneau::webhook::serve_files(
                listen,
                &cert_file,
                &key_file,
                cluster.clone(),
                juneau::webhook::Mutation {
                    probe_port: enable_probe_rewrite.then_some(probe_port),
                },
            ));
            drop(rt);
            drop(cluster);
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("juneau webhook: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Crds => {
            print!("{}", juneau::api::crds_yaml());
            ExitCode::SUCCESS
        }
        Cmd::Controller(args) => {
            init_logs("info");
            args.run()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Cli;

    /// A flag out of range is refused by name with its range, before anything runs.
    #[test]
    fn l2_21_l2_30_flags_out_of_range_are_refused_with_their_range() {
        for (args, flag, range) in [
            (
                &["juneau", "controller", "--default-l2-mtu", "70000"][..],
                "--default-l2-mtu",
                "576..=9000",
            ),
            (
                &["juneau", "controller", "--lease-duration", "0"][..],
                "--lease-duration",
                "3..",
            ),
            (
                &[
                    "juneau",
                    "standalone",
                    "--scenario",
                    "s.yaml",
                    "--fdb-aging",
                    "0",
                ][..],
                "--fdb-aging",
                "1..",
            ),
            (
                &["juneau", "node", "--node-name", "n", "--fdb-aging", "0"][..],
                "--fdb-aging",
                "1..",
            ),
        ] {
            let e = Cli::try_parse_from(args)
                .err()
                .expect("refused")
                .to_string();
            assert!(e.contains(flag) && e.contains(range), "{e}");
        }
        assert!(Cli::try_parse_from(["juneau", "controller", "--default-l2-mtu", "9000"]).is_ok());
    }
}
