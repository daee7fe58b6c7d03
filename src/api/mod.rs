//! Juneau's API (`juneau.loutres.me/v1alpha1`): one file per resource, spec and status
//! beside each other, plus the Pod annotations and the Pod record. Admission (validation and mutation)
//! lives in `crate::admission`, as pure functions over a snapshot of these objects.
pub mod addresspool;
pub mod allocationpool;
pub mod annotations;
pub mod arpadvertisement;
pub mod bgpadvertisement;
pub mod bgpnodestate;
pub mod bgppeer;
pub mod condition;
pub mod elasticip;
pub mod elasticipattachment;
pub mod externalnetwork;
pub mod externalnetworkattachment;
pub mod kinds;
pub mod l2network;
pub mod multus;
pub mod natgateway;
pub mod net;
pub mod networkacl;
pub mod networkendpoint;
pub mod networkinterface;
pub mod node;
pub mod object;
pub mod pod;
pub mod policy_rule;
pub mod routetable;
pub mod securitygroup;
pub mod service;
pub mod subnet;
pub mod vpc;

pub use addresspool::AddressPool;
pub use allocationpool::AllocationPool;
pub use arpadvertisement::ARPAdvertisement;
pub use bgpadvertisement::BGPAdvertisement;
pub use bgpnodestate::BGPNodeState;
pub use bgppeer::BGPPeer;
pub use elasticip::ElasticIP;
pub use elasticipattachment::ElasticIPAttachment;
pub use externalnetwork::ExternalNetwork;
pub use externalnetworkattachment::{
    ExternalNetworkAttachment, ExternalNetworkAttachmentSpec, ExternalNetworkAttachmentStatus,
    PORTS_EXHAUSTED,
};
pub use l2network::L2Network;
pub use natgateway::NATGateway;
pub use networkacl::NetworkACL;
pub use networkendpoint::NetworkEndpoint;
pub use networkinterface::NetworkInterface;
pub use node::NodeRecord;
pub use object::{Object, ObjectError};
pub use pod::PodRecord;
pub use routetable::RouteTable;
pub use securitygroup::SecurityGroup;
pub use service::{EndpointSliceRecord, ServiceRecord};
pub use subnet::Subnet;
pub use vpc::{TransitGateway, Vpc, VpcPeering};

/// The API group of every Juneau resource.
pub const GROUP: &str = "juneau.loutres.me";
/// Prefix of Juneau's Pod annotations.
pub const ANNOTATION_PREFIX: &str = "juneau.loutres.me/";
/// The Vpc (and Subnet) that exist from the start; only the default Subnet joins it.
pub const DEFAULT_VPC: &str = "default";

/// Every CustomResourceDefinition, in the order `kind/crds.yaml` lists them: the
/// registry's kinds (`kinds::snapshot_kinds`), then the two read outside the Snapshot.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    use kube::CustomResourceExt;
    macro_rules! registry_crds {
        ($($field:ident: $ty:ident = $scope:ident, $origin:ident),* $(,)?) => {
            vec![$($ty::crd(),)*]
        };
    }
    let mut crds = kinds::snapshot_kinds!(registry_crds);
    // Kinds no component reads into its Snapshot: the endpoints (read beside it) and
    // the controller's allocation pools.
    crds.extend([NetworkEndpoint::crd(), AllocationPool::crd()]);
    crds.into_iter()
        .map(|c| {
            let mut v = serde_json::to_value(c).expect("CRDs serialize");
            drop_unknown_formats(&mut v);
            serde_json::from_value(v).expect("and read back")
        })
        .collect()
}

/// The OpenAPI formats the API server knows; schemars also writes `uint32` and the like,
/// which `kubectl apply` warns about ("unrecognized format") and the server ignores.
const KNOWN_FORMATS: &[&str] = &[
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "binary",
    "date",
    "date-time",
    "duration",
    "password",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
];

fn drop_unknown_formats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if m.get("format")
                .and_then(|f| f.as_str())
                .is_some_and(|f| !KNOWN_FORMATS.contains(&f))
            {
                m.remove("format");
            }
            m.values_mut().for_each(drop_unknown_formats);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_unknown_formats),
        _ => {}
    }
}

/// The CRDs as one multi-document YAML (what `kind/crds.yaml` holds).
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|c| serde_yaml_ng::to_string(c).expect("CRDs serialize"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod crd_tests;
