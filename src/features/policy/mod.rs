//! Stateful NetworkACL and SecurityGroup (POL-*) on one connection table: the
//! rule-set ids and members (`controller`), the rules compiled for a Node (`node/`).
//! The dataplane writer is `node/dataplane/policy.rs`; the eBPF stages `policy/`.
pub mod admission;
pub mod cli;
pub mod controller;
pub mod feature;
pub mod node;
pub mod trace;
