//! Who reads which objects of a kind. The list of kinds itself is `api::kinds`
//! (`snapshot_kinds!`): the [`super::Snapshot`]'s fields, the Kubernetes backend's
//! watch caches, the admitted `Object` kinds and the CRDs are all generated from it, so
//! a kind added there is read, watched, cached and admitted everywhere at once (before,
//! the list was written out in five places and a kind could be watched but not read, or
//! read but not watched).

/// Who reads which objects of a kind: a node daemon keeps only its own Node's of the
/// kinds marked `Node` (by the `spec.nodeName` field selector), every object otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every object, for every component.
    All,
    /// Only a node daemon's own Node's objects, for a node daemon.
    Node,
}

pub(crate) use crate::api::kinds::snapshot_kinds;
