//! Admission in one place: validation (`validate`, every rule a pure function of the
//! object, its old version and a [`Snapshot`]) and mutation (`mutate`, L2-27's
//! dnsPolicy), dispatched by `admit` alike for the HTTPS webhook and the embedded store, so that a
//! standalone run admits exactly what a cluster would.
pub mod admit;
pub mod mutate;
pub mod probes;
pub mod validate;

pub use admit::{Request, admit};
pub use mutate::dns_policy;
pub use validate::{Rejection, Snapshot, Verdict};
