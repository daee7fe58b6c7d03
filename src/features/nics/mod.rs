//! Pod NICs: the annotations a Pod asks by (`admission`), the NetworkInterfaces and
//! their addresses (`controller`, `ipam`). The Node's side (veths, ports, the CNI
//! socket) is `node/nic/` and `node/agent/`: every feature's ports go through it. The
//! eBPF stage is `hooks/port`.
pub mod admission;
pub mod controller;
pub mod ipam;
