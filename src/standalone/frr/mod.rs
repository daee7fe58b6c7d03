//! The standalone outside's upstream router when it speaks BGP (issue 27): FRR's
//! zebra, bfdd and bgpd in the upstream namespace, peering with every Node's speaker,
//! ECMP over them, BFD. Its files (`conf`, pure), its command lines and readiness
//! (`procs`), and what `vtysh` says of its routes and sessions (`routes`, pure). All
//! checked against FRR 8.4.4 in namespaces, with fixtures captured there; see
//! docs/bgp-plan.md for what that run measured.
pub mod conf;
pub mod procs;
pub mod routes;
pub mod start;
pub mod vtysh;
