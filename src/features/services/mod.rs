//! ClusterIP Services from every Vpc (SVC-*): the EndpointSlices where no
//! kube-controller-manager runs, each Node's Service source addresses (`source`), the
//! Maglev tables and the desired Service maps (`node/`). The dataplane writer is
//! `node/dataplane/svc.rs` and `svc_host.rs`; the eBPF stages `svc/`. No admission
//! file: a Service is Kubernetes' own kind, checked where the store takes it
//! (`store/services.rs`).
pub mod cli;
pub mod endpointslice;
pub mod feature;
pub mod node;
pub mod source;
pub mod trace;
