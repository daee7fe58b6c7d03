//! `kubectl juneau`: inspect a Node's datapath.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use juneau::{
    cli::{
        self,
        output::{Output, json, show},
    },
    features::services::trace as svc_trace,
};

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
    /// What a Node's BGP speaker says: its sessions (state, last error) and the
    /// routes it announces (BGP-03).
    Bgp {
        #[command(subcommand)]
        command: BgpCmd,
    },
    /// Describe a Pod's NICs: the network of each, and who carries a direct ElasticIP
    /// (EIP-25).
    Describe {
        #[command(subcommand)]
        what: DescribeCmd,
    },
    /// The path of a packet from one Pod NIC to another, from the cluster's objects,
    /// with the source Node's learned table when its maps are on this machine; or, to a
    /// Service frontend, which backend a connection gets and why (with the Node's
    /// connections when its maps are here). The NetworkACLs and SecurityGroups met are
    /// judged in order, each naming the rule that decided (POL-03), by the
    /// destination's `:<port>[/proto]` (TCP by default). A NIC holding an ElasticIP
    /// directly is refused (EIP-21).
    Trace {
        /// The source: `<pod>` (its eth0) or `<pod>.<iface>`.
        from: String,
        /// The destination: `<pod>`, `<pod>.<iface>` or an IPv4 address of a NIC, each
        /// with an optional `:<port>[/proto]` for its policy, or a Service frontend
        /// `<ClusterIP>:<port>[/tcp|udp|sctp]`.
        to: String,
        #[command(flatten)]
        source: Source,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Subcommand)]
enum BgpCmd {
    Status {
        /// The Node whose speaker to ask (its control socket is on this machine).
        #[arg(long)]
        node: String,
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
    /// ifindex_host_mac, services, backends, conntrack, policy (rule sets and their
    /// counters), policy_nics (each NIC's SecurityGroups), or the views seed 003's
    /// troubleshooting reads: arp_table, fdb (needs --filter subnet_id=N),
    /// external_address_pools.
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
        /// ipaddr=<IPv4> (arp_table), subnet_id=<N> (fdb), addr=<IPv4> (services,
        /// backends, conntrack), set=<id> and kind=acl|sg (policy), vni=<N>, addr=<IPv4>
        /// and set=<id> (policy_nics).
        #[arg(long, value_name = "KEY=VALUE")]
        filter: Vec<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
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
        Cmd::Bgp {
            command: BgpCmd::Status { node, output },
        } => {
            let s = juneau::features::bgp::cli::status(&node)?;
            match output {
                Output::Json => json(&s),
                Output::Table => print!("{}", juneau::features::bgp::cli::render(&s)),
            }
            return Ok(());
        }
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
            // A Service frontend (`<ClusterIP>:<port>[/proto]`): which backend, and why.
            // `<NIC address>:<port>` is a NIC: its policy judged for that port.
            if let Some(frontend) = svc_trace::parse_frontend(&to)
                && !svc_trace::goes_to_a_nic(&world, frontend)
            {
                let hops = svc_trace::trace(
                    &world,
                    &source.namespace,
                    &from,
                    frontend,
                    &svc_trace::local_datapath,
                )?;
                show(&hops, output, cli::trace::render);
                return Ok(());
            }
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
    cli::dump::dump(&node, &map, inner_key, &filter, output)
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
