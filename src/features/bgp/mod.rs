//! ExternalNetwork type bgp (EIP-12, EIP-14, BGP-01 to BGP-03): BGPPeers every Node's
//! speaker peers with, BGPAdvertisements of bgp pools, one BGPNodeState per Node. The
//! speaker (BIRD 2) is a process beside the daemon, started through the crate's
//! supervisor (`feature.rs`); every Node also writes how it delivers the announced
//! prefixes (`pools.rs`, EIP-14). `docs/bgp-plan.md` is the plan and says what is
//! built.
pub mod admission;
pub mod bird;
pub mod cli;
pub mod controller;
pub mod desired;
pub mod feature;
pub mod pools;
pub mod report;
