//! The one list of Juneau's kinds ([`snapshot_kinds`]), beside the types it names.

/// Calls `$m! { field: Type = Scope, origin, ... }` with every kind a component reads
/// into its [`crate::cluster::Snapshot`], in the order the rules and the reconcilers
/// have always read them. `Scope` says who reads which objects of the kind
/// (`crate::cluster::Scope`); `origin` who writes them: `user` (a scenario lists it,
/// the embedded store and the webhook admit it as an [`super::Object`]) or `juneau`
/// (the controller writes it). The Snapshot's fields, the Kubernetes backend's watch
/// caches, the `Object` enum with the kinds the webhook judges, and the CRDs all come
/// from this one list.
macro_rules! snapshot_kinds {
    ($m:ident) => {
        $m! {
            vpcs: Vpc = All, user,
            peerings: VpcPeering = All, user,
            transit_gateways: TransitGateway = All, user,
            subnets: Subnet = All, user,
            l2networks: L2Network = All, user,
            route_tables: RouteTable = All, user,
            network_acls: NetworkACL = All, user,
            security_groups: SecurityGroup = All, user,
            interfaces: NetworkInterface = Node, juneau,
            external_networks: ExternalNetwork = All, user,
            address_pools: AddressPool = All, user,
            elastic_ips: ElasticIP = All, user,
            elastic_ip_attachments: ElasticIPAttachment = All, user,
            arp_advertisements: ARPAdvertisement = All, juneau,
            nat_gateways: NATGateway = All, user,
            external_network_attachments: ExternalNetworkAttachment = All, juneau,
            bgp_peers: BGPPeer = All, user,
            bgp_advertisements: BGPAdvertisement = All, user,
            bgp_node_states: BGPNodeState = Node, juneau,
        }
    };
}
pub(crate) use snapshot_kinds;
