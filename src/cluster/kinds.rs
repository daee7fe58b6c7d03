//! The one list of the kinds a component reads whole: the [`super::Snapshot`]'s fields
//! and the Kubernetes backend's watch caches are both generated from it, so a kind added
//! here is read, watched and cached everywhere at once (before, the list was written out
//! in five places and a kind could be watched but not read, or read but not watched).

/// Who reads which objects of a kind: a node daemon keeps only its own Node's of the
/// kinds marked `Node` (by the `spec.nodeName` field selector), every object otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every object, for every component.
    All,
    /// Only a node daemon's own Node's objects, for a node daemon.
    Node,
}

/// Calls `$m! { field: Type = Scope, ... }` with every kind of the [`super::Snapshot`],
/// in the order the rules and the reconcilers have always read them.
macro_rules! snapshot_kinds {
    ($m:ident) => {
        $m! {
            vpcs: Vpc = All,
            peerings: VpcPeering = All,
            transit_gateways: TransitGateway = All,
            subnets: Subnet = All,
            l2networks: L2Network = All,
            route_tables: RouteTable = All,
            network_acls: NetworkACL = All,
            security_groups: SecurityGroup = All,
            interfaces: NetworkInterface = Node,
            external_networks: ExternalNetwork = All,
            address_pools: AddressPool = All,
            elastic_ips: ElasticIP = All,
            elastic_ip_attachments: ElasticIPAttachment = All,
            arp_advertisements: ARPAdvertisement = All,
        }
    };
}
pub(crate) use snapshot_kinds;
