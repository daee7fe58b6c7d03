//! `juneau`: the Node daemon, the controller, the standalone mode and the tools around
//! the API.
use std::{net::Ipv4Addr, path::PathBuf, process::ExitCode};

use clap::{Args, Parser, Subcommand};
use juneau::node::daemon::{self, DaemonConfig};

#[derive(Parser)]
#[command(
    name = "juneau",
    about = "Juneau: VPC-style networking for Kubernetes with an eBPF datapath"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// `juneau node` flags (or `--config FILE` holding the same keys in YAML).
#[derive(Args)]
struct NodeArgs {
    /// YAML file with the settings below (kebab-case keys, e.g. `node-name: n1`);
    /// flags given as well win.
    #[arg(long)]
    config: Option<PathBuf>,
    /// This Node's name, as the cluster knows it (NetworkInterface.spec.nodeName).
    #[arg(long, env = "JUNEAU_NODE_NAME")]
    node_name: Option<String>,
    /// The underlay NIC the overlay uses: a name (`eth0`) or a pattern with `*` and `?`
    /// that must match exactly one interface (`enp*`). Besides its own interfaces, the
    /// daemon attaches to this one only (MX-02).
    #[arg(long)]
    underlay: Option<String>,
    /// This Node's VTEP address [default: the underlay's first IPv4 address].
    #[arg(long)]
    vtep: Option<Ipv4Addr>,
    /// Pin root on bpffs; maps and links live under `v<layout>/` inside
    /// [default: /sys/fs/bpf/juneau/<node-name>].
    #[arg(long)]
    pin_dir: Option<PathBuf>,
    /// The unix socket the CNI plugin calls (created 0600, root only)
    /// [default: /run/juneau/<node-name>/cni.sock].
    #[arg(long)]
    cni_socket: Option<PathBuf>,
    /// A standalone run's store socket: the cluster this daemon reads instead of the
    /// Kubernetes API.
    #[arg(long)]
    store_socket: Option<PathBuf>,
    /// The Kubernetes API's kubeconfig [default: KUBECONFIG, ~/.kube/config, or the
    /// Pod's service account].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Seconds without a frame after which a learned MAC expires (L2-30) [default: 300].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    fdb_aging: Option<u64>,
    /// Address of `/metrics` and `/healthz`, or `off` [default: 0.0.0.0:9464].
    #[arg(long)]
    metrics_addr: Option<String>,
    /// Turn the kernel's per-program run statistics on while the daemon runs
    /// (juneau_program_runs_total; costs a few ns per packet).
    #[arg(long)]
    bpf_stats: bool,
    /// Leave every frame between Nodes to the VXLAN device (no encapsulation in the
    /// datapath).
    #[arg(long)]
    no_datapath_encap: bool,
    /// How Pod ports get their program: `tc` (a tc filter: no RCU grace period per CNI
    /// ADD) or `tcx` (a TCX link: 3% more packets per second through a port, 13.6 ms
    /// more per ADD) [default: tc]. Ports attached already keep theirs.
    #[arg(long, value_parser = ["tc", "tcx"])]
    port_attach: Option<String>,
    /// Rounds of gratuitous ARP (a request and a reply, 1.1 s apart) when this Node
    /// starts answering for an ElasticIP; 0 sends none [default: 3].
    #[arg(long)]
    garp_rounds: Option<u32>,
}

impl NodeArgs {
    fn config(self) -> Result<DaemonConfig, String> {
        let mut file: serde_json::Map<String, serde_json::Value> = match &self.config {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| format!("--config {}: {e}", p.display()))?;
                serde_yaml_ng::from_str(&text)
                    .map_err(|e| format!("--config {}: {e}", p.display()))?
            }
            None => Default::default(),
        };
        let mut set = |k: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                file.insert(k.into(), v);
            }
        };
        set("node-name", self.node_name.map(Into::into));
        set("underlay", self.underlay.map(Into::into));
        set("vtep", self.vtep.map(|v| v.to_string().into()));
        set(
            "pin-dir",
            self.pin_dir.map(|p| p.display().to_string().into()),
        );
        set(
            "cni-socket",
            self.cni_socket.map(|p| p.display().to_string().into()),
        );
        set(
            "store-socket",
            self.store_socket.map(|p| p.display().to_string().into()),
        );
        set(
            "kubeconfig",
            self.kubeconfig.map(|p| p.display().to_string().into()),
        );
        set("fdb-aging", self.fdb_aging.map(Into::into));
        if self.bpf_stats {
            set("bpf-stats", Some(true.into()));
        }
        if self.no_datapath_encap {
            set("datapath-encap", Some(false.into()));
        }
        set("port-attach", self.port_attach.map(Into::into));
        set("garp-rounds", self.garp_rounds.map(Into::into));
        let from_flag = self.metrics_addr.is_some();
        let metrics = match (self.metrics_addr, file.get("metrics-addr")) {
            (Some(flag), _) => flag,
            (None, Some(serde_json::Value::String(s))) => s.clone(),
            (None, Some(other)) => {
                return Err(format!(
                    "metrics-addr in --config is {other}; write IP:PORT in quotes (e.g. \"0.0.0.0:9464\") or \"off\""
                ));
            }
            (None, None) => "0.0.0.0:9464".into(),
        };
        if metrics != "off" && metrics.parse::<std::net::SocketAddr>().is_err() {
            let at = if from_flag {
                "--metrics-addr"
            } else {
                "metrics-addr in --config"
            };
            return Err(format!(
                "{at} {metrics:?} is not IP:PORT; write e.g. 0.0.0.0:9464, or off"
            ));
        }
        if metrics == "off" {
            file.remove("metrics-addr");
        } else {
            file.insert("metrics-addr".into(), metrics.into());
        }
        let node = file
            .get("node-name")
            .and_then(|v| v.as_str())
            .ok_or("--node-name is required (or JUNEAU_NODE_NAME, or node-name in --config)")?
            .to_owned();
        if !file.contains_key("underlay") {
            return Err("--underlay is required: the NIC (or a pattern matching one) that carries the overlay".into());
        }
        file.entry("pin-dir")
            .or_insert_with(|| format!("{}/{node}", daemon::PIN_BASE).into());
        file.entry("cni-socket")
            .or_insert_with(|| format!("{}/{node}/cni.sock", daemon::RUN_BASE).into());
        file.entry("fdb-aging").or_insert_with(|| 300.into());
        serde_path_to_error::deserialize(serde_json::Value::from(file)).map_err(|e| {
            let inner = e.inner();
            if inner.to_string().starts_with("unknown field") {
                // Only a config file can hold a key no flag sets.
                return format!("--config: {inner}");
            }
            match e.path().to_string().as_str() {
                "." | "" => format!("node settings (the flags and --config): {inner}"),
                "datapath-encap" => format!(
                    "node setting datapath-encap (--no-datapath-encap, or that key in --config): {inner}"
                ),
                key => format!(
                    "node setting {key} (the --{key} flag, or that key in --config): {inner}"
                ),
            }
        })
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// The Node daemon (what the DaemonSet runs): loads and pins the datapath, adopts a
    /// previous daemon's, serves the CNI plugin, writes NetworkEndpoints, ages the
    /// learning tables, serves /metrics. Runs in the Node's network namespace until
    /// SIGTERM; the datapath stays attached after it exits.
    Node(Box<NodeArgs>),
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
        service_cidrs: Vec<String>,
        /// The API's kubeconfig [default: KUBECONFIG, ~/.kube/config, or the Pod's
        /// service account].
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// Run every reconciler (L2Network VNIs and status, Pod NICs and IPAM, RouteTables)
    /// against the Kubernetes API until SIGTERM: a pass after every change (watched).
    Controller {
        /// MTU of L2Networks that do not set one (1500 underlay less 50 of VXLAN); the
        /// range of spec.mtu.
        #[arg(long, default_value_t = 1450, value_parser = clap::value_parser!(u32).range(576..=9000))]
        default_l2_mtu: u32,
        /// CIDR of the default Subnet, made with the default Vpc when absent (a Pod
        /// without Juneau annotations gets eth0 there); `none` makes neither.
        #[arg(long, default_value = juneau::controller::DEFAULT_SUBNET_CIDR)]
        default_subnet_cidr: String,
        /// The API's kubeconfig [default: KUBECONFIG, ~/.kube/config, or the Pod's
        /// service account].
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Namespace of the leader-election Lease `juneau-controller`.
        #[arg(long, env = "POD_NAMESPACE", default_value = "juneau-system")]
        lease_namespace: String,
        /// Seconds a leader's Lease lasts without renewal before another replica takes
        /// over (renewed every third of it).
        #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..))]
        lease_duration: u64,
        /// This replica's identity in the Lease [default: the host name and PID].
        #[arg(long, env = "POD_NAME")]
        identity: Option<String>,
    },
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
            // A panicking thread would leave a poisoned lock and a daemon that answers
            // nothing: end the process instead, and let the supervisor (or the
            // DaemonSet) start a new one, which adopts the datapath without loss.
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                tracing::error!(%info, "panic: aborting so that the daemon is restarted");
                default(info);
                std::process::abort();
            }));
            let cfg = match args.config() {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("juneau node: {e}");
                    return ExitCode::from(2);
                }
            };
            match daemon::run(cfg) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "juneau node failed");
                    eprintln!("juneau node: {e}");
                    ExitCode::FAILURE
                }
            }
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
        Cmd::Controller {
            default_l2_mtu,
            default_subnet_cidr,
            kubeconfig,
            lease_namespace,
            lease_duration,
            identity,
        } => {
            init_logs("info");
            let default_subnet_cidr = match default_subnet_cidr.as_str() {
                "none" => None,
                c => match juneau::admission::validate::parse_cidr(c) {
                    Ok(net) => Some(net),
                    Err(e) => {
                        eprintln!("juneau controller: --default-subnet-cidr: {e}");
                        return ExitCode::from(2);
                    }
                },
            };
            let cfg = juneau::controller::Config {
                default_l2_mtu,
                default_subnet_cidr,
            };
            let cluster = match juneau::store::k8s::KubeCluster::connect(
                kubeconfig.as_deref(),
                juneau::store::k8s::CONTROLLER,
            ) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!(
                        "juneau controller: {e}; use `juneau standalone` on a machine without a cluster"
                    );
                    return ExitCode::FAILURE;
                }
            };
            let identity = identity.unwrap_or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_owned())
                    .unwrap_or_else(|_| "unknown".into());
                format!("{host}-{}", std::process::id())
            });
            let duration = std::time::Duration::from_secs(lease_duration);
            tracing::info!(identity, lease = %format!("{lease_namespace}/juneau-controller"), "starting");
            // SIGTERM ends the process where it is: every pass is idempotent, so what a
            // pass left unwritten the next leader writes.
            juneau::controller::run_elected(&cluster, &cfg, duration / 3, &|| {
                cluster.hold_lease(&lease_namespace, "juneau-controller", &identity, duration)
            })
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

    /// A bad node setting from a config file is named by its key, never dropped.
    #[test]
    fn a_bad_node_setting_names_its_key() {
        let dir = std::env::temp_dir().join(format!("jn-node-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let settings = |config: &str| -> Result<super::DaemonConfig, String> {
            let path = dir.join("node.yaml");
            std::fs::write(&path, config).unwrap();
            let cli = Cli::try_parse_from([
                "juneau",
                "node",
                "--config",
                path.to_str().unwrap(),
                "--node-name",
                "n",
                "--underlay",
                "eth9",
            ])
            .unwrap();
            match cli.command {
                super::Cmd::Node(args) => args.config(),
                _ => unreachable!(),
            }
        };
        assert!(settings("garp-rounds: 2\n").is_ok());
        let e = settings("garp-rounds: three\n").unwrap_err();
        assert!(
            e.starts_with("node setting garp-rounds (the --garp-rounds flag"),
            "{e}"
        );
        let e = settings("metrics-addr: 9100\n").unwrap_err();
        assert!(
            e.contains("metrics-addr in --config is 9100; write IP:PORT"),
            "{e}"
        );
        let e = settings("metrics-addr: localhost:9\n").unwrap_err();
        assert!(
            e.starts_with("metrics-addr in --config \"localhost:9\" is not IP:PORT"),
            "{e}"
        );
        let e = settings("fdb_aging: 5\n").unwrap_err();
        assert!(
            e.starts_with("--config: unknown field `fdb_aging`, expected one of"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
