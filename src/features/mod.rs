//! The features, one folder each, with one file per layer: `admission*` (the rules of
//! its kinds, pure functions of a [`crate::cluster::Snapshot`]), `controller*` (its
//! reconcilers: a [`crate::cluster::World`] in, its part of the desired state out),
//! `node`/`gateway` (what a Node's maps should hold, computed from the cluster),
//! `feature` (its [`crate::node::feature::NodeFeature`]: that state written through
//! its writer), `cli` and `trace` (`kubectl juneau`). Two layers stay crate-wide on
//! purpose: the map writers are methods of the one `node::dataplane::Dataplane` that
//! owns the loaded object and its pins (`node/dataplane/<feature>.rs`), and the eBPF
//! stages live in the eBPF crate's folder of the same name (`ebpf/juneau-ebpf/src/`).
//! The API types (`api/`) are the cluster's vocabulary and shared by all.
//!
//! A feature imports the crate-level modules (`api`, `alloc`, `cluster`, `store`,
//! `node::dataplane`, the `cli` core) and never another feature; the layers'
//! registries (`controller::reconcile`, `admission::validate`, `node::features`,
//! `cli`) import the features. `docs/architecture.md` lists each feature's files.
pub mod bgp;
pub mod elasticip;
pub mod l2;
pub mod nat;
pub mod nics;
pub mod policy;
pub mod router;
pub mod services;
