//! The Vpc router (seed 002, GW-*): Vpcs, Subnets and their anycast gateway,
//! RouteTables. `gateway/` is what a Node's router maps should hold (its NAT routes
//! included: the route to a NATGateway is one of the table's, `gateway/nat.rs`). The
//! dataplane writer is `node/dataplane/gw.rs` and `ports_gw.rs`; the eBPF stages `gw/`.
pub mod admission_routetable;
pub mod admission_subnet;
pub mod cli;
pub mod controller_routetable;
pub mod controller_subnet;
pub mod feature;
pub mod gateway;
