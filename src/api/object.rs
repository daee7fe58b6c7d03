//! Any Juneau object, by kind: what a scenario lists, what the embedded store takes,
//! and what the one admission dispatcher (`admission::admit`) judges for both the
//! webhook and the store.
use super::{
    AddressPool, ElasticIP, ElasticIPAttachment, ExternalNetwork, L2Network, NetworkACL,
    RouteTable, SecurityGroup, Subnet, TransitGateway, Vpc, VpcPeering,
};

/// A `kind`-tagged object that does not read: its kind is missing or unknown, or its
/// fields do not fit it. The message names the kind and lists the ones to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ObjectError(pub String);

/// An object of any kind the store takes, as read from a scenario.
#[derive(Clone, Debug)]
pub enum Object {
    Vpc(Vpc),
    VpcPeering(VpcPeering),
    TransitGateway(TransitGateway),
    Subnet(Subnet),
    L2Network(L2Network),
    RouteTable(RouteTable),
    NetworkACL(NetworkACL),
    SecurityGroup(SecurityGroup),
    ExternalNetwork(ExternalNetwork),
    AddressPool(AddressPool),
    ElasticIP(ElasticIP),
    ElasticIPAttachment(ElasticIPAttachment),
}

impl Object {
    /// The kinds [`Object::from_value`] reads.
    pub const KINDS: [&str; 12] = [
        "Vpc",
        "VpcPeering",
        "TransitGateway",
        "Subnet",
        "L2Network",
        "RouteTable",
        "NetworkACL",
        "SecurityGroup",
        "ExternalNetwork",
        "AddressPool",
        "ElasticIP",
        "ElasticIPAttachment",
    ];

    /// Reads `kind`-tagged YAML/JSON (apiVersion juneau.loutres.me/v1alpha1).
    pub fn from_value(v: serde_json::Value) -> Result<Object, ObjectError> {
        let kind = v
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_owned();
        let err = |e: serde_json::Error| ObjectError(format!("cannot read {kind}: {e}"));
        Ok(match kind.as_str() {
            "Vpc" => Object::Vpc(serde_json::from_value(v).map_err(err)?),
            "VpcPeering" => Object::VpcPeering(serde_json::from_value(v).map_err(err)?),
            "TransitGateway" => Object::TransitGateway(serde_json::from_value(v).map_err(err)?),
            "Subnet" => Object::Subnet(serde_json::from_value(v).map_err(err)?),
            "L2Network" => Object::L2Network(serde_json::from_value(v).map_err(err)?),
            "RouteTable" => Object::RouteTable(serde_json::from_value(v).map_err(err)?),
            "NetworkACL" => Object::NetworkACL(serde_json::from_value(v).map_err(err)?),
            "SecurityGroup" => Object::SecurityGroup(serde_json::from_value(v).map_err(err)?),
            "ExternalNetwork" => Object::ExternalNetwork(serde_json::from_value(v).map_err(err)?),
            "AddressPool" => Object::AddressPool(serde_json::from_value(v).map_err(err)?),
            "ElasticIP" => Object::ElasticIP(serde_json::from_value(v).map_err(err)?),
            "ElasticIPAttachment" => {
                Object::ElasticIPAttachment(serde_json::from_value(v).map_err(err)?)
            }
            "" => {
                return Err(ObjectError(format!(
                    "kind is missing; write one of {}",
                    Self::KINDS.join(", ")
                )));
            }
            other => {
                return Err(ObjectError(format!(
                    "kind {other:?} is not a Juneau object this store takes; write one of {}",
                    Self::KINDS.join(", ")
                )));
            }
        })
    }
}
