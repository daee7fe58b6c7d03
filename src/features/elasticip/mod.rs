//! ElasticIPs (seed 003, EIP-*): held by a Pod NIC or attached 1:1 to a Subnet NIC
//! (ElasticIPAttachment, NAT-03), ExternalNetworks and their pools, ARP announcement
//! with gratuitous ARP (`garp`). The dataplane writer is `node/dataplane/eip.rs` and
//! `ports_public.rs`; the eBPF stages `eip/`.
pub mod admission;
pub mod admission_attachment;
pub mod cli;
pub mod controller;
pub mod feature;
pub mod garp;
pub mod node;
