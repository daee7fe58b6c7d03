//! Updates of the embedded store, as `kubectl apply` updates an object the API server
//! holds: admission judges the old object against the new, a changed spec moves
//! `metadata.generation` (a NetworkACL's `status.rulesetVersion` follows it), and the
//! status the controller wrote is kept until it writes the next one.
use super::{Store, StoreError, name_of};
use crate::{
    admission::{self, Request},
    api::Object,
};

impl Store {
    /// Replaces the object of the same kind and name (namespace for the namespaced
    /// kinds) with `obj`. Nothing is written on refusal.
    pub fn update(&self, obj: Object) -> Result<(), StoreError> {
        self.write(|w| {
            let s = &mut w.objects;
            macro_rules! replace {
                ($list:ident, $variant:ident, $new:expr, $kind:literal, $key:expr $(, $status:ident)?) => {{
                    let mut new = $new;
                    let k = $key(&new);
                    let Some(i) = s.$list.iter().position(|x| $key(x) == k) else {
                        return Err(StoreError::NotFound {
                            kind: $kind,
                            name: k,
                        });
                    };
                    let old = s.$list[i].clone();
                    admission::admit(
                        Request::Update {
                            old: &Object::$variant(old.clone()),
                            new: &Object::$variant(new.clone()),
                        },
                        s,
                    )?;
                    let generation = old.metadata.generation.unwrap_or(1);
                    new.metadata.generation = Some(if old.spec == new.spec {
                        generation
                    } else {
                        generation + 1
                    });
                    $(new.$status = old.$status;)?
                    s.$list[i] = new;
                }};
            }
            match obj {
                Object::L2Network(o) => replace!(l2networks, L2Network, o, "L2Network", name_of, status),
                Object::Vpc(o) => replace!(vpcs, Vpc, o, "Vpc", name_of, status),
                Object::VpcPeering(o) => replace!(peerings, VpcPeering, o, "VpcPeering", name_of),
                Object::TransitGateway(o) => {
                    replace!(
                        transit_gateways,
                        TransitGateway,
                        o,
                        "TransitGateway",
                        name_of
                    )
                }
                Object::Subnet(o) => replace!(subnets, Subnet, o, "Subnet", name_of, status),
                Object::RouteTable(o) => {
                    replace!(route_tables, RouteTable, o, "RouteTable", name_of)
                }
                Object::NetworkACL(o) => {
                    replace!(network_acls, NetworkACL, o, "NetworkACL", name_of, status)
                }
                Object::SecurityGroup(o) => {
                    replace!(security_groups, SecurityGroup, o, "SecurityGroup", name_of, status)
                }
                Object::ExternalNetwork(o) => {
                    replace!(
                        external_networks,
                        ExternalNetwork,
                        o,
                        "ExternalNetwork",
                        name_of, status
                    )
                }
                Object::AddressPool(o) => {
                    replace!(address_pools, AddressPool, o, "AddressPool", name_of)
                }
                Object::NATGateway(o) => {
                    replace!(nat_gateways, NATGateway, o, "NATGateway", name_of, status)
                }
                Object::BGPPeer(o) => replace!(bgp_peers, BGPPeer, o, "BGPPeer", name_of),
                Object::BGPAdvertisement(o) => {
                    replace!(bgp_advertisements, BGPAdvertisement, o, "BGPAdvertisement", name_of)
                }
                Object::ElasticIP(mut o) => {
                    o.metadata.namespace.get_or_insert_with(|| "default".into());
                    replace!(elastic_ips, ElasticIP, o, "ElasticIP", crate::cluster::key, status)
                }
                Object::ElasticIPAttachment(mut o) => {
                    o.metadata.namespace.get_or_insert_with(|| "default".into());
                    replace!(
                        elastic_ip_attachments,
                        ElasticIPAttachment,
                        o,
                        "ElasticIPAttachment",
                        crate::cluster::key,
                        status
                    )
                }
            }
            Ok(())
        })
    }
}
