//! Admission rules as pure functions: an object (and its old version) plus a
//! [`Snapshot`] of the cluster in, a verdict out. The webhook and the embedded store
//! both call these, so a standalone run rejects exactly what a cluster would.
pub mod deletion;
pub mod segment;

/// The object set the rules read; it lives in [`crate::cluster`] beside the watch caches
/// that fill it, and stays reachable here for the rules and their callers.
pub use crate::cluster::Snapshot;
pub use crate::features::bgp::admission::{
    speaker_not_built, validate_bgp_advertisement_create, validate_bgp_advertisement_update,
    validate_bgp_peer_create, validate_bgp_peer_update,
};
pub use crate::features::elasticip::admission::{
    validate_address_pool_create, validate_elastic_ip_update, validate_external_network_create,
    validate_pod_elastic_ips,
};
pub use crate::features::elasticip::admission_attachment::{
    validate_elastic_ip_attachment_create, validate_elastic_ip_attachment_update,
};
pub use crate::features::l2::admission::{validate_l2network_create, validate_l2network_update};
pub use crate::features::nat::admission::{
    validate_delete_external_network, validate_delete_nat_gateway, validate_nat_gateway_create,
    validate_nat_gateway_update,
};
pub use crate::features::nics::admission::validate_pod_create;
pub use crate::features::policy::admission::{
    MAX_PEERS_PER_RULE, MAX_PORTS_PER_RULE, MAX_RULES_PER_DIRECTION, SgProblems, acl_rule_problems,
    sg_rule_problems, validate_network_acl_create, validate_network_acl_update,
    validate_security_group_create, validate_security_group_update,
};
pub use crate::features::router::admission_routetable::{
    ROUTE_TYPES, validate_route_table_create, validate_route_table_update,
};
pub use crate::features::router::admission_subnet::{
    validate_subnet_create, validate_subnet_update,
};
pub use deletion::{
    validate_delete_address_pool, validate_delete_network_acl, validate_delete_route_table,
    validate_delete_security_group, validate_delete_subnet, validate_delete_vpc,
};

/// A refusal: the field at fault and a message that says what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Rejection {
    pub field: String,
    pub message: String,
}

pub(crate) fn reject(field: impl Into<String>, message: impl Into<String>) -> Rejection {
    Rejection {
        field: field.into(),
        message: message.into(),
    }
}

pub type Verdict = Result<(), Rejection>;

#[cfg(test)]
mod tests;
