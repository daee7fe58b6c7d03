//! One step of a `kubectl juneau trace`: shared by the traces of every kind (between
//! NICs, through a Service, out through a NATGateway or the internet gateway).
use serde::Serialize;

#[derive(Debug, Serialize, PartialEq)]
pub struct Hop {
    /// The Node the step happens on.
    pub node: String,
    pub what: String,
}
