//! Kubernetes-style status conditions.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `type`, `status` (`True`/`False`/`Unknown`), `reason`, `message`, as in
/// `metav1.Condition` (without the transition time, which the writer fills in).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Condition {
    pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.into(),
            status: if ok { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Puts `c` in `conditions` in place of the one of its type (or adds it); true when
/// that changed anything.
pub fn set(conditions: &mut Vec<Condition>, c: Condition) -> bool {
    match conditions.iter_mut().find(|o| o.type_ == c.type_) {
        Some(o) if *o == c => false,
        Some(o) => {
            *o = c;
            true
        }
        None => {
            conditions.push(c);
            true
        }
    }
}
