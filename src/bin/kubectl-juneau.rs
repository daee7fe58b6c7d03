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
    /// Programs attached to each interface of a Node, as the kernel reports them (TCX
    /// queries), with the NIC or device each interface belongs to (MX-03).
    Attachments {
        /// The Node (its daemon's network namespace is found through its pid file).
        #[arg(long, required_unless_present = "netns")]
        node: Option<String>,
        /// A network namespace path instead of --node.
        #[arg(long)]
        netns: Option<std::path::PathBuf>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Describe a Pod's NICs: the network of each, and who carries a direct ElasticIP
    /// (EIP-25).
    Describe {
        #[command(subcommand)]
        what: DescribeCmd,
    },
    /// The path of a packet from one Pod NIC to another, from the cluster's objects,
    /// with the source Node's learned table when its maps are on this machine. A NIC
    /// holding an ElasticIP directly is refused (EIP-21).
    Trace {
        /// The source: `<pod>` (its eth0) or `<pod>.<iface>`.
        from: String,
        /// The destination: `<pod>`, `<pod>.<iface>` or an IPv4 address of a NIC.
        to: String,
        #[command(flatten)]
        source: Source,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Subcommand)]
enum DescribeCmd {
    Pod {
        name: String,
        #[command(flatten)]
        source: Source,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

/// Where the cluster's objects are read.
#[derive(clap::Args)]
struct Source {
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// A standalone run's store socket (default: the one run on this machine, if any).
    #[arg(long)]
    store: Option<std::path::PathBuf>,
    /// The kubeconfig (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum BpfCmd {
    /// Dump a map: l2_fdb (needs --inner-key vni=N), drops, gw_seg, gw_routes, gw_nbr,
    /// gw_stats, elastic_ip_direct, external_arp_table, ifindex_external_network,
    /// ifindex_host_mac, or the views seed 003's troubleshooting reads: arp_table, fdb
    /// (needs --filter subnet_id=N), external_address_pools.
    Dump {
        map: String,
        /// The Node whose pinned maps to read.
        #[arg(long)]
        node: String,
        /// For map-of-maps: which inner table (`vni=<N>`).
        #[arg(long)]
        inner_key: Option<String>,
        /// Show only the rows whose column has this value, `key=value`, repeatable:
        /// addr=<IPv4> (elastic_ip_direct, external_arp_table, external_address_pools),
        /// network_id=<N> (elastic_ip_direct, ifindex_external_network), ifindex=<N>
        /// (ifindex_external_network, ifindex_host_mac), subnet_id=<N> and
        /// ipaddr=<IPv4> (arp_table), subnet_id=<N> (fdb).
        #[arg(long, value_name = "KEY=VALUE")]
        filter: Vec<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

fn json<T: serde::Serialize>(rows: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(rows).expect("rows serialize")
    );
}

/// Rows as JSON, or as the table `table` renders.
fn show<T: serde::Serialize>(rows: &[T], output: Output, table: fn(&[T]) -> String) {
    match output {
        Output::Json => json(&rows),
        Output::Table => print!("{}", table(rows)),
    }
}

/// Named counters (drops, the router's).
fn counters(rows: &[(String, u64)], what: &str, output: Output) {
    match output {
        Output::Json => json(&rows),
        Output::Table => {
            println!("{what:<20} {:>10}", "COUNT");
            for (r, n) in rows {
                println!("{r:<20} {n:>10}");
            }
        }
    }
}

fn attachments(
    node: Option<String>,
    netns: Option<std::path::PathBuf>,
    output: Output,
) -> Result<(), cli::CliError> {
    let ns = match (netns, node) {
        (Some(ns), _) => ns,
        (None, Some(node)) => cli::node_netns(&node)?,
        (None, None) => unreachable!("clap requires one"),
    };
    let rows = cli::attachments(&ns)?;
    match output {
        Output::Json => json(&rows),
        Output::Table => {
            println!(
                "{:<16} {:>7} {:<12} {:<17} {:>6} OWNER",
                "INTERFACE", "IFINDEX", "HOOK", "PROGRAM", "ID"
            );
            for r in rows {
                println!(
                    "{:<16} {:>7} {:<12} {:<17} {:>6} {}",
                    r.interface,
                    r.ifindex,
                    r.hook,
                    r.program,
                    r.program_id,
                    if r.owner.is_empty() { "-" } else { &r.owner }
                );
            }
        }
    }
    Ok(())
}

fn run() -> Result<(), cli::CliError> {
    let (map, node, inner_key, filter, output) = match Cli::parse().command {
        Cmd::Attachments {
            node,
            netns,
            output,
        } => return attachments(node, netns, output),
        Cmd::Describe {
            what:
                DescribeCmd::Pod {
                    name,
                    source,
                    output,
                },
        } => {
            let world = cli::read_world(source.store.as_deref(), source.kubeconfig.as_deref())?;
            let d = cli::describe::describe_pod(&world, &source.namespace, &name)?;
            match output {
                Output::Json => json(&d),
                Output::Table => print!("{}", cli::describe::render(&d)),
            }
            return Ok(());
        }
        Cmd::Trace {
            from,
            to,
            source,
            output,
        } => {
            let world = cli::read_world(source.store.as_deref(), source.kubeconfig.as_deref())?;
            let hops = cli::trace::trace(
                &world,
                &source.namespace,
                &from,
                &to,
                &cli::trace::local_fdb,
            )?;
            show(&hops, output, cli::trace::render);
            return Ok(());
        }
        Cmd::Bpf {
            command:
                BpfCmd::Dump {
                    map,
                    node,
                    inner_key,
                    filter,
                    output,
                },
        } => (map, node, inner_key, filter, output),
    };
    let Some(name) = cli::dumpable(&map) else {
        return Err(cli::CliError::Usage(format!(
            "unknown map {map:?}: {}",
            cli::DUMPABLE_MAPS.join(", ")
        )));
    };
    let filter = cli::Filter::parse(name, &filter)?;
    let dir = cli::node_dir(&node);
    match name {
        "l2_fdb" => {
            let key = inner_key.ok_or_else(|| {
                cli::CliError::Usage(
                    "l2_fdb holds one table per segment: add --inner-key vni=<VNI>".into(),
                )
            })?;
            let mut rows = cli::dump_fdb(&dir, cli::parse_inner_key(&key)?)?;
            // The NIC behind each local port, when the Node's namespace can be found.
            let names = cli::node_netns(&node)
                .and_then(|ns| cli::port_names(&ns))
                .unwrap_or_default();
            for r in &mut rows {
                if let Some(n) = names.get(&r.ifindex) {
                    r.port.clone_from(n);
                }
            }
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:<18} {:>8} {:<32} {:<16} {:>4}",
                        "MAC", "IFINDEX", "PORT", "VTEP", "AGE"
                    );
                    for r in rows {
                        println!(
                            "{:<18} {:>8} {:<32} {:<16} {:>3}s",
                            r.mac,
                            r.ifindex,
                            if r.port.is_empty() { "-" } else { &r.port },
                            if r.vtep.is_empty() { "-" } else { &r.vtep },
                            r.age_seconds
                        );
                    }
                }
            }
        }
        "drops" => counters(&cli::dump_drops(&dir)?, "REASON", output),
        "gw_stats" => counters(&cli::dump_gw_stats(&dir)?, "COUNTER", output),
        "gw_seg" => {
            let rows = cli::dump_gw_segments(&dir)?;
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:>8} {:<16} {:<18} {:>5} {:>5}",
                        "VNI", "GATEWAY", "GATEWAYMAC", "MTU", "TABLE"
                    );
                    for r in rows {
                        println!(
                            "{:>8} {:<16} {:<18} {:>5} {:>5}",
                            r.vni, r.gateway, r.gateway_mac, r.mtu, r.table
                        );
                    }
                }
            }
        }
        "gw_routes" => {
            let rows = cli::dump_gw_routes(&dir)?;
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:>5} {:<20} {:<12} {:>8} {:<16} {:>5} {:<16}",
                        "TABLE", "DST", "KIND", "VNI", "GATEWAY", "MTU", "NEXTHOP"
                    );
                    for r in rows {
                        println!(
                            "{:>5} {:<20} {:<12} {:>8} {:<16} {:>5} {:<16}",
                            r.table,
                            r.dst,
                            r.kind,
                            r.vni,
                            r.gateway,
                            r.mtu,
                            r.next_hop.as_deref().unwrap_or("-")
                        );
                    }
                }
            }
        }
        "gw_nbr" => {
            let rows = cli::dump_gw_neighbours(&dir)?;
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:>8} {:<16} {:<18} {:<16} SOURCE",
                        "VNI", "ADDRESS", "MAC", "VTEP"
                    );
                    for r in rows {
                        println!(
                            "{:>8} {:<16} {:<18} {:<16} {}",
                            r.vni, r.address, r.mac, r.vtep, r.source
                        );
                    }
                }
            }
        }
        "elastic_ip_direct" => show(
            &cli::dump_elastic_ips(&dir, &node, &filter)?,
            output,
            cli::elastic_ip_table,
        ),
        "external_arp_table" => show(
            &cli::dump_arp_answers(&dir, &filter)?,
            output,
            cli::arp_answer_table,
        ),
        "ifindex_external_network" => show(
            &cli::dump_eip_ports(&dir, &filter)?,
            output,
            cli::eip_port_table,
        ),
        "ifindex_host_mac" => show(
            &cli::host_macs(&cli::dump_eip_ports(&dir, &filter)?),
            output,
            cli::host_mac_table,
        ),
        "arp_table" => show(
            &cli::dump_arp_table(&dir, &node, &filter)?,
            output,
            cli::arp_table,
        ),
        "fdb" => show(
            &cli::dump_fdb_view(&dir, &node, &filter)?,
            output,
            cli::fdb_table,
        ),
        "external_address_pools" => show(
            &cli::dump_address_pools(&dir, &node, &filter)?,
            output,
            cli::pool_table,
        ),
        other => unreachable!("{other} is in DUMPABLE_MAPS without a dump"),
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
