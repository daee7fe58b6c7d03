//! Juneau: a Kubernetes CNI with VPC-style networking and an eBPF datapath.
//!
//! The crate holds every userspace part as a module; the binaries in `src/bin` are thin.
//! The eBPF object built from `ebpf/juneau-ebpf` is embedded here ([`EBPF_OBJECT`]).

pub mod admission;
pub mod alloc;
pub mod api;
pub mod child;
pub mod cli;
pub mod cluster;
/// The CNI protocol between the plugin and the daemon, in its own crate (`cni/`).
pub use juneau_cni as cni;
pub mod controller;
pub mod features;
pub mod netns;
pub mod node;
pub mod scenario;
pub mod standalone;
pub mod store;
pub mod supervisor;
pub mod unixsock;
pub mod webhook;

/// A MAC as `aa:bb:cc:dd:ee:ff`, the one way every output of the project writes it.
pub fn format_mac(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Reads `aa:bb:cc:dd:ee:ff` (any case), the form [`format_mac`] writes.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// The eBPF object, compiled by `build.rs` (aya-build) and embedded so that the daemon
/// is one self-contained binary.
pub static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/juneau"));

/// Measurement baselines, loaded by benchmarks and tests beside the datapath.
pub mod baseline {
    /// The floor object (`ebpf/juneau-ebpf/src/bin/floor.rs`): the one-lookup
    /// `bpf_redirect` every datapath path is compared with (`floor_redirect`, map
    /// `jn_floor_fwd`), the bare programs that give each path its ceiling, and the
    /// packet generators of the rate benchmarks.
    pub static FLOOR_OBJECT: &[u8] =
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/juneau-floor"));
}
