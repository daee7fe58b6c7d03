//! NIC kinds behind one driver interface (netavark's per-driver setup and teardown):
//! the agent picks the driver from the NetworkInterface and never plumbs a kind
//! itself. `l2network`, `subnet` and `elasticip` (all veth pairs: `veth_nic`).
mod elasticip;
mod l2network;
mod subnet;
mod veth_nic;

use std::{net::Ipv4Addr, path::Path, sync::Mutex};

use crate::{
    api::NetworkInterface,
    cni::{CniError, CniResult, code},
    node::{
        Dataplane,
        dataplane::{PortSpec, RoutedPort},
        netlink::Session,
        veth::PortAlias,
    },
};

pub use elasticip::ElasticIpNic;
pub use l2network::L2NetworkNic;
pub use subnet::SubnetNic;

/// What one NIC's setup needs to know of its Pod and Node.
pub struct NicContext<'a> {
    pub container_id: &'a str,
    pub netns: &'a Path,
    pub namespace: &'a str,
    pub pod: &'a str,
    pub node: &'a str,
    pub node_ip: Ipv4Addr,
    pub dataplane: &'a Mutex<Dataplane>,
    /// Ports get their program as a tc filter (their veths get clsact while down).
    pub port_filters: bool,
}

/// What a setup made, in order, so that a failed ADD undoes exactly that.
#[derive(Debug, Default)]
pub struct Made {
    /// Datapath ports (ifindex).
    pub ports: Vec<u32>,
    /// Host-side links (name).
    pub links: Vec<String>,
}

/// One kind of Pod NIC.
pub trait NicDriver: Sync {
    /// Plumbs `nic` into the Pod and the datapath with the ADD's netlink session,
    /// recording what it made in `made` (the caller undoes it on failure) and what it
    /// reports in `result`.
    fn setup(
        &self,
        ctx: &NicContext<'_>,
        nl: &Session,
        nic: &NetworkInterface,
        made: &mut Made,
        result: &mut CniResult,
    ) -> Result<(), CniError>;

    /// Removes a NIC found by its host link's alias; every error is collected, none
    /// stops the rest. Every kind so far is a veth pair and its port.
    fn teardown(
        &self,
        dataplane: &Mutex<Dataplane>,
        host: &str,
        ifindex: u32,
        alias: &PortAlias,
    ) -> Vec<String> {
        veth_nic::teardown(dataplane, host, ifindex, alias)
    }

    /// Checks that `nic` is still as setup left it (CNI CHECK): the veth pair, its
    /// port, MTU and address.
    fn check(
        &self,
        ctx: &NicContext<'_>,
        nic: &NetworkInterface,
        host: Option<(&str, u32)>,
    ) -> Result<(), CniError> {
        veth_nic::check(ctx, nic, host)
    }
}

/// The driver of a NIC's kind.
pub fn driver_for(nic: &NetworkInterface) -> Result<&'static dyn NicDriver, CniError> {
    if nic.spec.subnet.is_some() {
        return Ok(&SubnetNic);
    }
    if nic.spec.l2_network.is_some() {
        return Ok(&L2NetworkNic);
    }
    if nic.spec.elastic_ip.is_some() {
        return Ok(&ElasticIpNic);
    }
    Err(CniError::new(
        code::INVALID_CONFIG,
        format!(
            "NetworkInterface {}: names no Subnet, L2Network or ElasticIP",
            nic.metadata.name.as_deref().unwrap_or("")
        ),
    ))
}

/// Every host-side port link, whatever its kind, tears down the same way today (a
/// veth pair and its port).
pub fn driver_for_port(_alias: &PortAlias) -> &'static dyn NicDriver {
    &L2NetworkNic
}

/// The datapath port of `nic` on host interface `ifindex`: the same at ADD and when a
/// restarted daemon attaches it again. A Subnet NIC's port is routed and held to the
/// NIC's MAC and address (`routed` stays `None` while it has no address).
pub fn port_spec(nic: &NetworkInterface, container_id: &str, ifindex: u32) -> PortSpec {
    let status = nic.status.clone().unwrap_or_default();
    let direct = nic.spec.elastic_ip.is_some();
    let routed = (nic.spec.subnet.is_some() || direct)
        .then_some(())
        .and_then(|_| {
            Some(RoutedPort {
                mac: nic_mac(container_id, &nic.spec.interface),
                ip: status.address.split('/').next()?.parse().ok()?,
                eip: direct,
            })
        });
    PortSpec {
        ifindex,
        vni: status.vni,
        mtu: status.mtu,
        peer: true,
        routed,
    }
}

/// The port of `nic` when the controller has finished it (a VNI, and a Subnet NIC's
/// address): a restarted daemon attaches no port the datapath would drop everything of.
pub fn ready_port_spec(
    nic: &NetworkInterface,
    container_id: &str,
    ifindex: u32,
) -> Option<PortSpec> {
    let spec = port_spec(nic, container_id, ifindex);
    let held = nic.spec.subnet.is_some() || nic.spec.elastic_ip.is_some();
    (spec.vni != 0 && (!held || spec.routed.is_some())).then_some(spec)
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(String) -> CniError {
    let what = what.into();
    move |e| CniError::new(code::IO_FAILURE, what).details(e)
}

/// A stable, locally administered MAC for one NIC of one container.
pub fn nic_mac(container_id: &str, interface: &str) -> [u8; 6] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in container_id.bytes().chain([b'/']).chain(interface.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    [0x02, b[1], b[2], b[3], b[4], b[5]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mx_01_nic_macs_are_stable_and_locally_administered_unicast() {
        let m = nic_mac("abc", "eth1");
        assert_eq!(m, nic_mac("abc", "eth1"));
        assert_ne!(m, nic_mac("abc", "eth2"));
        assert_eq!(m[0] & 0x03, 0x02, "locally administered, unicast");
    }
}
