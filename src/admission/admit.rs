//! The one admission dispatcher: which rule judges which request. The HTTPS webhook
//! (`webhook::review`) and the embedded store (`Store::create`, `create_pod`) both
//! come here, so a kind gets its rules in one place and a standalone run refuses
//! exactly what a cluster would.
use super::validate::{self, Snapshot, Verdict, reject};
use crate::api::{Object, PodRecord};

/// What is asked of admission.
pub enum Request<'a> {
    Create(&'a Object),
    Update {
        old: &'a Object,
        new: &'a Object,
    },
    /// Deletions are judged by name: what still refers to the object.
    Delete {
        kind: &'a str,
        name: &'a str,
    },
    /// A Pod's Juneau annotations (its NICs, addresses, ElasticIPs).
    CreatePod(&'a PodRecord),
}

/// The verdict for one request (pure). Kinds without rules of their own pass.
pub fn admit(request: Request<'_>, snap: &Snapshot) -> Verdict {
    use Object as O;
    match request {
        Request::Create(object) => match object {
            O::L2Network(n) => validate::validate_l2network_create(n, snap),
            O::Subnet(s) => validate::validate_subnet_create(s, snap),
            O::RouteTable(t) => validate::validate_route_table_create(t, snap),
            O::ExternalNetwork(e) => validate::validate_external_network_create(e, snap),
            O::AddressPool(p) => validate::validate_address_pool_create(p, snap),
            _ => Ok(()),
        },
        Request::Update { old, new } => match (old, new) {
            (O::L2Network(o), O::L2Network(n)) => validate::validate_l2network_update(o, n, snap),
            (O::Subnet(o), O::Subnet(n)) => validate::validate_subnet_update(o, n, snap),
            (O::RouteTable(o), O::RouteTable(n)) => {
                validate::validate_route_table_update(o, n, snap)
            }
            (O::ElasticIP(o), O::ElasticIP(n)) => validate::validate_elastic_ip_update(o, n),
            // An update that changes the spec is held to the creation rules (each rule
            // leaves the object itself out of the others it compares with): a pool
            // edited to a backward range would otherwise be dropped by the allocator
            // without a word. A metadata-only update (labels, finalizers) passes, so
            // that objects that already clash can still be labelled and deleted.
            (O::ExternalNetwork(o), O::ExternalNetwork(n)) if o.spec != n.spec => {
                validate::validate_external_network_create(n, snap)
            }
            (O::AddressPool(o), O::AddressPool(n)) if o.spec != n.spec => {
                validate::validate_address_pool_create(n, snap)
            }
            (o, n) if std::mem::discriminant(o) != std::mem::discriminant(n) => Err(reject(
                "kind",
                "an update cannot change an object's kind; delete it and create the new one",
            )),
            _ => Ok(()),
        },
        Request::Delete { kind, name } => match kind {
            "Vpc" => validate::validate_delete_vpc(name, snap),
            "RouteTable" => validate::validate_delete_route_table(name, snap),
            "Subnet" => validate::validate_delete_subnet(name, snap),
            "NetworkACL" => validate::validate_delete_network_acl(name, snap),
            _ => Ok(()),
        },
        Request::CreatePod(pod) => validate::validate_pod_create(&pod.annotations, snap)
            .and_then(|()| validate::validate_pod_elastic_ips(pod, snap)),
    }
}
