//! What the segment kinds' reconcilers share (Subnets, L2Networks, and an
//! ExternalNetwork's direct NICs): VNIs from the one `subnet-vni` pool, the gateway
//! MAC a VNI gives, the condition of a pool run dry, and the order objects are served
//! in (oldest first), which the ElasticIPs' addresses follow too.
use crate::{
    admission::validate::Snapshot,
    alloc::Pool,
    api::{AllocationPool, condition::Condition, net::Mac},
};

/// The `subnet-vni` pool, holding the VNIs of every Subnet, L2Network and
/// ExternalNetwork.
pub fn held_vnis(snap: &Snapshot) -> Pool<u32> {
    let range = AllocationPool::subnet_vni().spec.number;
    let mut pool = Pool::new([(range.min, range.max)]);
    let held = snap
        .subnets
        .iter()
        .filter_map(|s| s.status.as_ref().map(|st| st.vni))
        .chain(
            snap.l2networks
                .iter()
                .filter_map(|l| l.status.as_ref().map(|st| st.vni)),
        )
        // An ExternalNetwork's direct NICs are a segment too (EIP-03).
        .chain(
            snap.external_networks
                .iter()
                .filter_map(|n| n.status.as_ref().map(|st| st.network_id)),
        )
        .filter(|v| *v != 0);
    for v in held {
        pool.hold(v);
    }
    pool
}

/// A locally administered MAC for the gateway of segment `vni`: stable, and distinct
/// per segment.
pub fn gateway_mac(vni: u32) -> Mac {
    let b = vni.to_be_bytes();
    Mac([0x02, 0x4a, 0x4e, b[1], b[2], b[3]])
}

/// The lowest free VNI of the `subnet-vni` pool, marked held; `None` when exhausted.
pub fn next_vni(pool: &mut Pool<u32>) -> Option<u32> {
    pool.first_free()
}

/// Oldest first (by name when no timestamps), so that allocation is deterministic.
pub fn oldest_first<K: kube::Resource>(objects: &[K]) -> Vec<&K> {
    let mut sorted: Vec<&K> = objects.iter().collect();
    sorted.sort_by_key(|o| {
        (
            o.meta().creation_timestamp.clone().map(|t| t.0),
            o.meta().name.clone(),
        )
    });
    sorted
}

/// The condition of a segment whose VNI cannot be allocated.
pub fn vni_exhausted() -> Condition {
    Condition::new(
        "Ready",
        false,
        "VNIExhausted",
        "the subnet-vni AllocationPool is exhausted",
    )
}
