//! AllocationPool: numbered resources shared cluster-wide (`subnet-vni`).
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pool Subnets and L2Networks share, so the forwarding tables can be keyed by VNI
/// alone (L2-22).
pub const SUBNET_VNI: &str = "subnet-vni";

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "juneau.loutres.me",
    version = "v1alpha1",
    derive = "PartialEq",
    kind = "AllocationPool"
)]
#[serde(rename_all = "camelCase")]
pub struct AllocationPoolSpec {
    /// `number`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `firstFit`.
    pub strategy: String,
    pub number: NumberRange,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct NumberRange {
    pub min: u32,
    pub max: u32,
}

impl AllocationPool {
    /// The bootstrap `subnet-vni` pool: 24-bit VNIs, 1 reserved.
    pub fn subnet_vni() -> Self {
        AllocationPool::new(
            SUBNET_VNI,
            AllocationPoolSpec {
                type_: "number".into(),
                strategy: "firstFit".into(),
                number: NumberRange {
                    min: 2,
                    max: (1 << 24) - 1,
                },
            },
        )
    }
}
