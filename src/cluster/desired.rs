//! What the controller writes through the [`super::Cluster`] interface: the statuses and
//! objects its reconcilers computed, as one value that every backend applies whole.
use std::collections::BTreeMap;

use crate::api::{
    ARPAdvertisement, EndpointSliceRecord, ExternalNetworkAttachment, NetworkInterface, RouteTable,
    Subnet, Vpc, elasticip::ElasticIPStatus, elasticipattachment::ElasticIPAttachmentStatus,
    externalnetwork::ExternalNetworkStatus, l2network::L2NetworkStatus,
    natgateway::NATGatewayStatus, networkacl::NetworkAclStatus, securitygroup::SecurityGroupStatus,
    subnet::SubnetStatus,
};

/// What the objects should look like.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Desired {
    pub l2_status: BTreeMap<String, L2NetworkStatus>,
    #[serde(default)]
    pub subnet_status: BTreeMap<String, SubnetStatus>,
    /// By name. `aclID` shares one id space with the groups' `groupID`
    /// (`controller::policy`).
    #[serde(default)]
    pub network_acl_status: BTreeMap<String, NetworkAclStatus>,
    /// By name.
    #[serde(default)]
    pub security_group_status: BTreeMap<String, SecurityGroupStatus>,
    /// The default Vpc and Subnet, when they are to be made.
    #[serde(default)]
    pub default_vpc: Option<Vpc>,
    #[serde(default)]
    pub default_subnet: Option<Subnet>,
    pub route_tables: Vec<RouteTable>,
    pub interfaces: Vec<NetworkInterface>,
    #[serde(default)]
    pub external_network_status: BTreeMap<String, ExternalNetworkStatus>,
    /// By `namespace/name`.
    #[serde(default)]
    pub elastic_ip_status: BTreeMap<String, ElasticIPStatus>,
    /// By `namespace/name`.
    #[serde(default)]
    pub attachment_status: BTreeMap<String, ElasticIPAttachmentStatus>,
    /// Every ARPAdvertisement: of a directly held ElasticIP (`eip-<ns>-<name>`) and of
    /// a Node's NAT address (`ena-<attachment>`).
    #[serde(default)]
    pub arp_advertisements: Vec<ARPAdvertisement>,
    /// Every ExternalNetworkAttachment, with its status (NAT-02): any other goes.
    #[serde(default)]
    pub external_network_attachments: Vec<ExternalNetworkAttachment>,
    /// The BGPAdvertisements the controller writes (NAT-02's `ena-` on bgp networks,
    /// labelled as its own): any other of its own goes; a user's are never touched.
    #[serde(default)]
    pub bgp_advertisements: Vec<crate::api::BGPAdvertisement>,
    /// One BGPNodeState per Node while a BGPPeer exists (BGP-03), spec only: each
    /// Node's daemon writes its status. Any other goes.
    #[serde(default)]
    pub bgp_node_states: Vec<crate::api::BGPNodeState>,
    /// By NATGateway name.
    #[serde(default)]
    pub nat_gateway_status: BTreeMap<String, NATGatewayStatus>,
    /// Pods whose NICs wait for a direct NIC's network (logged, not written).
    #[serde(skip)]
    pub waiting: Vec<(String, String)>,
    /// Pods whose annotations do not parse, and why (logged, not written): their NICs
    /// are kept as they are.
    #[serde(skip)]
    pub unreadable_pods: Vec<(String, String)>,
    /// ElasticIPs (`namespace/name`) to hold with the finalizer, and to let go (EIP-19).
    #[serde(default)]
    pub eip_finalize: Vec<String>,
    #[serde(default)]
    pub eip_release: Vec<String>,
    /// The EndpointSlices this controller maintains (`controller::endpointslice`),
    /// when it maintains them: every slice it manages is replaced by these.
    #[serde(default)]
    pub endpoint_slices: Option<Vec<EndpointSliceRecord>>,
}

/// How [`Desired`] and the backends name a namespaced object (ElasticIPs and their
/// attachments): `namespace/name`, `default` when the namespace is unset.
pub fn key<K: kube::Resource>(o: &K) -> String {
    format!(
        "{}/{}",
        o.meta().namespace.as_deref().unwrap_or("default"),
        o.meta().name.as_deref().unwrap_or("")
    )
}
