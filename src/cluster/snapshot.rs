//! The objects the rules and reconcilers read: one value for the admission rules, the
//! reconcilers and the node's syncs, whichever backend filled it.
use crate::api::{
    ARPAdvertisement, AddressPool, BGPAdvertisement, BGPNodeState, BGPPeer, ElasticIP,
    ElasticIPAttachment, ExternalNetwork, ExternalNetworkAttachment, L2Network, NATGateway,
    NetworkACL, NetworkInterface, RouteTable, SecurityGroup, Subnet, TransitGateway, Vpc,
    VpcPeering,
};

macro_rules! define_snapshot {
    ($($field:ident: $ty:ident = $scope:ident, $origin:ident),* $(,)?) => {
        /// Every object of the kinds in [`super::snapshot_kinds`], and what the rules
        /// need beside them.
        #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
        pub struct Snapshot {
            $(
                #[serde(default)]
                pub $field: Vec<$ty>,
            )*
            /// Pods being deleted (`namespace/name`): an ElasticIP their NICs hold may be
            /// named by a new Pod (EIP-20).
            #[serde(default)]
            pub terminating_pods: Vec<String>,
            /// The cluster's Service CIDR(s) (kube-apiserver `--service-cluster-ip-range`).
            pub service_cidrs: Vec<ipnet::Ipv4Net>,
            /// Every Node's name and InternalIP, as the rules need them (a BGPPeer is
            /// never a Node, BGP-01): a copy of `World::nodes`' addresses.
            #[serde(default)]
            pub node_addresses: Vec<(String, std::net::Ipv4Addr)>,
        }
    };
}
super::snapshot_kinds!(define_snapshot);

fn name<K: kube::Resource>(o: &K) -> &str {
    o.meta().name.as_deref().unwrap_or("")
}

impl Snapshot {
    /// The usable address ranges of an ExternalNetwork's pools, in the pools' order:
    /// what ElasticIPs and the Nodes' attachments (NAT-02) are handed out of, first fit
    /// (an `alloc::Pool` of them); what admission checks a requested address against.
    pub fn pool_ranges(
        &self,
        net: &ExternalNetwork,
    ) -> Vec<(std::net::Ipv4Addr, std::net::Ipv4Addr)> {
        net.spec
            .address_pools
            .iter()
            .filter_map(|p| self.address_pool(p))
            .flat_map(|p| {
                p.spec
                    .addresses
                    .iter()
                    .filter_map(|a| crate::api::addresspool::usable(&p.spec.advertise_mode, a).ok())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

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
    pub fn security_group(&self, n: &str) -> Option<&SecurityGroup> {
        self.security_groups.iter().find(|o| name(*o) == n)
    }
    pub fn external_network(&self, n: &str) -> Option<&ExternalNetwork> {
        self.external_networks.iter().find(|o| name(*o) == n)
    }
    pub fn address_pool(&self, n: &str) -> Option<&AddressPool> {
        self.address_pools.iter().find(|o| name(*o) == n)
    }
    pub fn nat_gateway(&self, n: &str) -> Option<&NATGateway> {
        self.nat_gateways.iter().find(|o| name(*o) == n)
    }
    pub fn external_network_attachment(&self, n: &str) -> Option<&ExternalNetworkAttachment> {
        self.external_network_attachments
            .iter()
            .find(|o| name(*o) == n)
    }
    /// The rule set of a segment's `spec.networkACL`: 0 for none, `SET_PENDING` while
    /// the NetworkACL has no id (or is missing). The Nodes' routers write it into the
    /// segment, the policy trace reads it: both by this.
    pub fn acl_set(&self, acl: Option<&str>) -> u32 {
        use juneau_common::policy::SET_PENDING;
        let Some(acl) = acl else { return 0 };
        self.network_acl(acl)
            .and_then(|a| a.status.as_ref())
            .map(|s| s.acl_id)
            .filter(|id| *id != 0 && *id < SET_PENDING as u32)
            .unwrap_or(SET_PENDING as u32)
    }
    /// The table a segment of `vpc` routes by: its own (`gateway.routeTable` of an
    /// L2Network), else its Vpc's main table (`status.mainRouteTable`, else the
    /// RouteTable named as the Vpc), else the Vpc's implicit table (`vpc:<name>`: its
    /// connected routes, as a cloud's main table always holds the local route). The
    /// Nodes' routers and the controller's checks of what a segment routes by share it.
    pub fn table_of(&self, vpc: &str, own: Option<String>) -> String {
        let in_vpc = |t: &str| {
            self.route_tables
                .iter()
                .any(|rt| rt.metadata.name.as_deref() == Some(t) && rt.spec.vpc == vpc)
        };
        let main = self
            .vpc(vpc)
            .and_then(|v| v.status.as_ref())
            .map(|s| s.main_route_table.clone())
            .filter(|t| !t.is_empty());
        [own, main, Some(vpc.to_owned())]
            .into_iter()
            .flatten()
            .find(|t| in_vpc(t))
            .unwrap_or_else(|| format!("vpc:{vpc}"))
    }
    /// The networkID of an ElasticIP's ExternalNetwork (0: none yet, or no network).
    pub fn network_id_of(&self, eip: &ElasticIP) -> u32 {
        self.external_network(&eip.spec.external_network)
            .and_then(|n| n.status.as_ref())
            .map_or(0, |s| s.network_id)
    }
    /// ElasticIPs are namespaced: a Pod names one of its own namespace (EIP-05).
    pub fn elastic_ip(&self, namespace: &str, n: &str) -> Option<&ElasticIP> {
        self.elastic_ips.iter().find(|o| {
            name(*o) == n && o.metadata.namespace.as_deref().unwrap_or("default") == namespace
        })
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
