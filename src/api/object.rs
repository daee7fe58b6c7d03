//! Any Juneau object, by kind: what a scenario lists, what the embedded store takes,
//! and what the one admission dispatcher (`admission::admit`) judges for both the
//! webhook and the store. Generated from the registry (`api::kinds`): its `user`
//! kinds.
use super::{
    AddressPool, BGPAdvertisement, BGPPeer, ElasticIP, ElasticIPAttachment, ExternalNetwork,
    L2Network, NATGateway, NetworkACL, RouteTable, SecurityGroup, Subnet, TransitGateway, Vpc,
    VpcPeering,
};

/// A `kind`-tagged object that does not read: its kind is missing or unknown, or its
/// fields do not fit it. The message names the kind and lists the ones to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ObjectError(pub String);

/// Keeps the registry's `user` kinds (those a scenario lists and admission judges).
macro_rules! define_object {
    (@user [$($kind:ident)*]) => {
        /// An object of any kind the store takes, as read from a scenario.
        #[derive(Clone, Debug)]
        pub enum Object {
            $($kind($kind),)*
        }

        impl Object {
            /// The kinds [`Object::from_value`] reads.
            pub const KINDS: &'static [&'static str] = &[$(stringify!($kind),)*];

            /// Reads `kind`-tagged YAML/JSON (apiVersion juneau.loutres.me/v1alpha1).
            pub fn from_value(v: serde_json::Value) -> Result<Object, ObjectError> {
                let kind = v
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or("")
                    .to_owned();
                let err = |e: serde_json::Error| ObjectError(format!("cannot read {kind}: {e}"));
                $(
                    if kind == stringify!($kind) {
                        return Ok(Object::$kind(serde_json::from_value(v).map_err(err)?));
                    }
                )*
                Err(ObjectError(if kind.is_empty() {
                    format!("kind is missing; write one of {}", Self::KINDS.join(", "))
                } else {
                    format!(
                        "kind {kind:?} is not a Juneau object this store takes; write one of {}",
                        Self::KINDS.join(", ")
                    )
                }))
            }
        }
    };
    (@user [$($kind:ident)*] $field:ident: $ty:ident = $scope:ident, user, $($rest:tt)*) => {
        define_object!(@user [$($kind)* $ty] $($rest)*);
    };
    (@user [$($kind:ident)*] $field:ident: $ty:ident = $scope:ident, juneau, $($rest:tt)*) => {
        define_object!(@user [$($kind)*] $($rest)*);
    };
    (@user [$($kind:ident)*] $field:ident: $ty:ident = $scope:ident, $origin:ident) => {
        define_object!(@user [$($kind)*] $field: $ty = $scope, $origin,);
    };
    ($($all:tt)*) => {
        define_object!(@user [] $($all)*);
    };
}
super::kinds::snapshot_kinds!(define_object);
