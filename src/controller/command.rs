//! `juneau controller`: its flags and its start (the API client, the leader election,
//! then every reconciler in a loop). Beside the controller, so the binary only
//! dispatches.
use std::{path::PathBuf, process::ExitCode};

use clap::Args;

use crate::store::k8s::{CONTROLLER, KubeCluster};

#[derive(Args)]
pub struct ControllerArgs {
    /// MTU of L2Networks that do not set one (1500 underlay less 50 of VXLAN); the
    /// range of spec.mtu.
    #[arg(long, default_value_t = 1450, value_parser = clap::value_parser!(u32).range(576..=9000))]
    default_l2_mtu: u32,
    /// CIDR of the default Subnet, made with the default Vpc when absent (a Pod
    /// without Juneau annotations gets eth0 there); `none` makes neither.
    #[arg(long, default_value = super::DEFAULT_SUBNET_CIDR)]
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
}

impl ControllerArgs {
    /// Runs until SIGTERM, which ends the process where it is: every pass is
    /// idempotent, so what a pass left unwritten the next leader writes.
    pub fn run(self) -> ExitCode {
        let default_subnet_cidr = match self.default_subnet_cidr.as_str() {
            "none" => None,
            c => match crate::api::net::parse_cidr(c) {
                Ok(net) => Some(net),
                Err(e) => {
                    eprintln!("juneau controller: --default-subnet-cidr: {e}");
                    return ExitCode::from(2);
                }
            },
        };
        let cfg = super::Config {
            default_l2_mtu: self.default_l2_mtu,
            default_subnet_cidr,
            // A cluster's kube-controller-manager writes the slices.
            endpoint_slices: false,
        };
        let cluster = match KubeCluster::connect(self.kubeconfig.as_deref(), CONTROLLER) {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "juneau controller: {e}; use `juneau standalone` on a machine without a cluster"
                );
                return ExitCode::FAILURE;
            }
        };
        let identity = self.identity.unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "unknown".into());
            format!("{host}-{}", std::process::id())
        });
        let duration = std::time::Duration::from_secs(self.lease_duration);
        let namespace = self.lease_namespace;
        tracing::info!(identity, lease = %format!("{namespace}/juneau-controller"), "starting");
        super::run_elected(&cluster, &cfg, duration / 3, &|| {
            cluster.hold_lease(&namespace, "juneau-controller", &identity, duration)
        })
    }
}
