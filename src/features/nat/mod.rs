//! NATGateway (NAT-*): the way out of a Vpc, SNAT on each Node to its per-Node
//! address. The routes to it are the router's (`router/gateway/nat.rs`), the ports
//! claimed in the kernel are read back by `ports`. The dataplane writer is
//! `node/dataplane/ports_public.rs`; the eBPF stages `nat/`. No `feature` file: the
//! router's sync writes the NAT routes and addresses with its own.
pub mod admission;
pub mod cli;
pub mod controller;
pub mod ports;
pub mod trace;
