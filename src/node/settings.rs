//! `juneau node`'s settings: its flags, a YAML config file with the same keys, and the
//! defaults, merged into one [`DaemonConfig`]. Here, beside the daemon, so the binary
//! stays a dispatcher and the rules of a setting live with the code that reads it.
use std::{net::Ipv4Addr, path::PathBuf};

use clap::Args;

use super::daemon::{self, DaemonConfig};

/// `juneau node` flags (or `--config FILE` holding the same keys in YAML).
#[derive(Args)]
pub struct NodeArgs {
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
    /// Loopback address where the kubelet's rewritten probes arrive (the webhook's
    /// `--enable-probe-rewrite`, L2-27), or `off` [default: off; the DaemonSet sets
    /// 127.0.0.1:9465].
    #[arg(long)]
    probe_addr: Option<String>,
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
    /// Entries of the connection table, both directions of a translated connection
    /// counting one each; new connections past it are refused (CT_FULL), established
    /// ones are never evicted. A table already pinned keeps its size [default: 1048576].
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..))]
    conntrack_entries: Option<u32>,
    /// Who runs the BGP speaker (BIRD): `supervised` (this daemon starts it; it
    /// outlives the daemon), `container` (the DaemonSet's `juneau speaker` container;
    /// the daemon only writes its file) or `off` [default: supervised].
    #[arg(long, value_parser = ["supervised", "container", "off"])]
    bgp_speaker: Option<String>,
}

impl NodeArgs {
    /// The daemon's settings: the flags over the config file over the defaults, each
    /// refused by its key and flag when it does not read.
    pub fn config(self) -> Result<DaemonConfig, String> {
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
        set("conntrack-entries", self.conntrack_entries.map(Into::into));
        set("bgp-speaker", self.bgp_speaker.map(Into::into));
        address_setting(
            &mut file,
            "metrics-addr",
            self.metrics_addr,
            ("0.0.0.0:9464", "0.0.0.0:9464"),
        )?;
        address_setting(
            &mut file,
            "probe-addr",
            self.probe_addr,
            ("off", "127.0.0.1:9465"),
        )?;
        let node = file
            .get("node-name")
            .and_then(|v| v.as_str())
            .ok_or("--node-name is required (or JUNEAU_NODE_NAME, or node-name in --config)")?
            .to_owned();
        if !file.contains_key("underlay") {
            return Err("--underlay is required: the NIC (or a pattern matching one) that carries the overlay".into());
        }
        file.entry("pin-dir").or_insert_with(|| {
            crate::node::dataplane::pins::pin_dir_of(&node)
                .display()
                .to_string()
                .into()
        });
        file.entry("cni-socket")
            .or_insert_with(|| daemon::socket_of(&node).display().to_string().into());
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

/// An `IP:PORT`-or-`off` setting (`key`): the flag over the file over `default`; `off`
/// leaves the key out. Refused by its flag or key, with `example`, when it does not read.
fn address_setting(
    file: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    flag: Option<String>,
    (default, example): (&str, &str),
) -> Result<(), String> {
    let from_flag = flag.is_some();
    let value = match (flag, file.get(key)) {
        (Some(flag), _) => flag,
        (None, Some(serde_json::Value::String(s))) => s.clone(),
        (None, Some(other)) => {
            return Err(format!(
                "{key} in --config is {other}; write IP:PORT in quotes (e.g. \"{example}\") or \"off\""
            ));
        }
        (None, None) => default.into(),
    };
    if value != "off" && value.parse::<std::net::SocketAddr>().is_err() {
        let at = if from_flag {
            format!("--{key}")
        } else {
            format!("{key} in --config")
        };
        return Err(format!(
            "{at} {value:?} is not IP:PORT; write e.g. {example}, or off"
        ));
    }
    if value == "off" {
        file.remove(key);
    } else {
        file.insert(key.into(), value.into());
    }
    Ok(())
}

/// `juneau node`: the settings, then the daemon until SIGTERM.
pub fn main(args: NodeArgs) -> std::process::ExitCode {
    use std::process::ExitCode;
    // A panicking thread would leave a poisoned lock and a daemon that answers
    // nothing: end the process instead, and let the supervisor (or the DaemonSet)
    // start a new one, which adopts the datapath without loss.
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        node: NodeArgs,
    }

    /// A bad node setting from a config file is named by its key, never dropped.
    #[test]
    fn a_bad_node_setting_names_its_key() {
        let dir = std::env::temp_dir().join(format!("jn-node-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let settings = |config: &str| -> Result<DaemonConfig, String> {
            let path = dir.join("node.yaml");
            std::fs::write(&path, config).unwrap();
            Cli::try_parse_from([
                "node",
                "--config",
                path.to_str().unwrap(),
                "--node-name",
                "n",
                "--underlay",
                "eth9",
            ])
            .unwrap()
            .node
            .config()
        };
        assert!(settings("garp-rounds: 2\n").is_ok());
        // BGP-01: who runs the speaker, from the file too; a word it does not know is
        // refused by its key.
        assert_eq!(
            settings("bgp-speaker: container\n").unwrap().bgp_speaker,
            crate::features::bgp::feature::SpeakerMode::Container
        );
        let e = settings("bgp-speaker: bird\n").unwrap_err();
        assert!(e.starts_with("node setting bgp-speaker"), "{e}");
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
