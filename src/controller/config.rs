//! The controller's flags: apart from the reconcilers' list (`controller::reconcile`),
//! so that a feature's reconciler reads its flags without importing the list.
/// Controller flags.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `--default-l2-mtu`: 1500 underlay less 50 bytes of VXLAN (L2-21).
    pub default_l2_mtu: u32,
    /// `--default-subnet-cidr`: the default Subnet's CIDR, made with the default Vpc
    /// when absent; `None` makes neither.
    pub default_subnet_cidr: Option<ipnet::Ipv4Net>,
    /// Maintain the EndpointSlices of Services with a selector (`endpointslice`):
    /// where no kube-controller-manager runs, the standalone mode.
    pub endpoint_slices: bool,
}

/// The default Subnet's CIDR unless told otherwise (kube-ovn's `ovn-default`).
pub const DEFAULT_SUBNET_CIDR: &str = "10.16.0.0/16";

impl Default for Config {
    fn default() -> Self {
        Self {
            default_l2_mtu: 1450,
            default_subnet_cidr: DEFAULT_SUBNET_CIDR.parse().ok(),
            endpoint_slices: false,
        }
    }
}
