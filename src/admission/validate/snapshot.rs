//! The objects the rules and reconcilers read.
use crate::api::{
    L2Network, NetworkACL, NetworkInterface, RouteTable, SecurityGroup, Subnet, TransitGateway,
    Vpc, VpcPeering,
};

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    pub vpcs: Vec<Vpc>,
    pub peerings: Vec<VpcPeering>,
    pub transit_gateways: Vec<TransitGateway>,
    pub subnets: Vec<Subnet>,
    pub l2networks: Vec<L2Network>,
    pub route_tables: Vec<RouteTable>,
    pub network_acls: Vec<NetworkACL>,
    pub security_groups: Vec<SecurityGroup>,
    pub interfaces: Vec<NetworkInterface>,
    /// The cluster's Service CIDR(s) (kube-apiserver `--service-cluster-ip-range`).
    pub service_cidrs: Vec<String>,
}

fn name<K: kube::Resource>(o: &K) -> &str {
    o.meta().name.as_deref().unwrap_or("")
}

impl Snapshot {
    pub fn vpc(&self, n: &str) -> Option<&Vpc> {
        self.vpcs.iter().find(|o| name(*o) == n)
    }
    pub fn l2network(&self, n: &str) -> Option<&L2Network> {
        self.l2networks.iter().find(|o| name(*o) == n)
    }
    pub fn subnet(&self, n: &str) -> Option<&Subnet> {
        self.subnets.iter().find(|o| name(*o) == n)
    }
    pub fn route_table(&self, n: &str) -> Option<&RouteTable> {
        self.route_tables.iter().find(|o| name(*o) == n)
    }
    pub fn network_acl(&self, n: &str) -> Option<&NetworkACL> {
        self.network_acls.iter().find(|o| name(*o) == n)
    }

    /// Vpcs whose addresses must not overlap `vpc`'s: itself, its VpcPeering peers,
    /// and every Vpc sharing a TransitGateway with it.
    pub fn connected_vpcs(&self, vpc: &str) -> Vec<String> {
        let mut out = vec![vpc.to_owned()];
        let groups = self
            .peerings
            .iter()
            .map(|p| &p.spec.vpcs)
            .chain(self.transit_gateways.iter().map(|t| &t.spec.vpcs));
        for vpcs in groups {
            if vpcs.iter().any(|v| v == vpc) {
                for v in vpcs {
                    if !out.contains(v) {
                        out.push(v.clone());
                    }
                }
            }
        }
        out
    }
}
