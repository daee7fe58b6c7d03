//! L2Network (seed 001, L2-*): a pure L2 segment across Nodes over VXLAN. The
//! dataplane writer is `node/dataplane/l2.rs` and `overlay.rs`; the eBPF stages are
//! `l2/` and `overlay/`. The Node's segment bookkeeping (`node/l2network.rs`) and the
//! NICs (`node/nic/`) serve every segment kind, so they stay with the Node. No `cli`
//! file: `kubectl juneau bpf dump fdb` is the cli core's (`cli/maps.rs`).
pub mod admission;
pub mod controller;
pub mod feature;
