//! ClusterIP Services in the datapath (kube-proxy-free): frontends (`jn_svc`, the
//! ClusterIP, port and protocol a consuming Vpc's Pods reach), each with its Maglev
//! table (`jn_svc_maglev`, one inner array per Service) naming its backends
//! (`jn_svc_backend`). A connection's first packet picks its backend here; every later
//! packet of it finds the backend in its connection entry (`ct`).

/// Frontends every Node holds (a ClusterIP port and protocol each).
pub const MAX_SERVICES: u32 = 65536;
/// Backends of every Service together.
pub const MAX_BACKENDS: u32 = 262_144;
/// Slots of a Service's Maglev table (a prime; see the daemon's `maglev.rs`).
pub const MAGLEV_SLOTS: u32 = 1021;
/// The flags of a Maglev table (`jn_svc_maglev`'s inner arrays): `BPF_F_MMAPABLE`, so
/// the daemon writes a new table through a mapping of its values (a copy) instead of
/// one kernel update per slot, 1,021 a Service (issue 42's `svc_10k_program`). An
/// mmapable array keeps each value in 8 bytes.
pub const MAGLEV_FLAGS: u32 = 1024;

/// Key of `jn_svc`: the ClusterIP (network order), the port (network order) and the
/// IP protocol.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SvcKey {
    pub ip: u32,
    pub port: u16,
    pub proto: u8,
    pub pad: u8,
}

/// The Service keeps each client on one backend (`sessionAffinity: ClientIP`).
pub const SVC_AFFINITY: u32 = 1;

/// Value of `jn_svc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SvcEntry {
    /// The Service's id: its Maglev table's slot in `jn_svc_maglev`, and the
    /// connections' `service`. Never 0.
    pub id: u32,
    /// Backends able to take new connections (0: rejected with ICMP port unreachable).
    pub backends: u32,
    /// `SVC_*`.
    pub flags: u32,
    /// With `SVC_AFFINITY`: seconds a client stays on its backend.
    pub affinity_s: u32,
}

/// Value of `jn_svc_backend[id]`: where a backend is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backend {
    /// Network order.
    pub ip: u32,
    /// Network order.
    pub port: u16,
    /// `BACKEND_*`.
    pub flags: u16,
}

/// The backend is outside every Subnet (a Node's address, the API server's): its
/// connections leave through the Node's stack (`jn_svc_host`), their source translated
/// to this Node's Service source address (SVC-02).
pub const BACKEND_HOST: u16 = 1;

/// The backend is a Pod of the provider Vpc (the default Vpc's Subnets): a client of
/// another Vpc reaches it with its source translated, routed by the provider's table
/// (SVC-02). Any other Pod backend is routed by the client's own table, as before.
pub const BACKEND_PROVIDER: u16 = 2;

/// Value of `jn_svc_host[0]`: how this Node reaches backends through its own stack.
/// The daemon keeps a veth pair in the Node's namespace: connections enter the stack
/// on `ifindex` (by a redirect to its ingress, with its MAC as destination); their
/// replies, routed to `snat_ip` over the same device, come out of its peer, whose
/// ingress runs `svc_host`. `snat_ip` 0: no source address yet, host backends refused.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SvcHost {
    pub ifindex: u32,
    /// Network order.
    pub snat_ip: u32,
    /// The device's MAC, padded as a learning-table key.
    pub mac: crate::FdbKey,
    /// The VNI of the provider Vpc's `natSourceSubnet` (SVC-02): a connection from
    /// another Vpc to a provider Pod is routed by that segment's table once its source
    /// is `snat_ip`. 0: none (such connections are refused, `NO_SOURCE_ADDRESS`).
    pub provider_vni: u32,
    pub pad: u32,
}

/// The MAC every Node's Service source address has in the router's neighbour table
/// (SVC-02): a provider Pod's reply routed to it is taken by `svc_host` where the
/// address's Node is (locally, or after the overlay), never switched to a port.
pub const SVC_SOURCE_MAC: [u8; 6] = [0x02, 0x4a, 0x4e, 0x53, 0x52, 0x43];

/// Key of `jn_svc_affinity`: the Service and the client.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AffinityKey {
    pub service: u32,
    pub client: u32,
}

/// Value of `jn_svc_affinity`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Affinity {
    pub backend: u32,
    pub pad: u32,
    pub last_seen_ns: u64,
}

const _: () = assert!(core::mem::size_of::<SvcKey>() == 8);
const _: () = assert!(core::mem::size_of::<SvcEntry>() == 16);
const _: () = assert!(core::mem::size_of::<Backend>() == 8);
const _: () = assert!(core::mem::size_of::<SvcHost>() == 24);
