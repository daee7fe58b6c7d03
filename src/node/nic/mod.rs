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
        dataplane::{PortKind, PortSpec},
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

/// A NIC's kind, read once from its NetworkInterface (whose spec names one of a
/// Subnet, an L2Network or an ElasticIP, as the reference's CRD does): the daemon
/// matches on this, never on the spec's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicKind<'a> {
    Subnet(&'a str),
    L2Network(&'a str),
    ElasticIp(&'a str),
}

impl<'a> NicKind<'a> {
    pub fn of(nic: &'a NetworkInterface) -> Result<Self, CniError> {
        let s = &nic.spec;
        match (&s.subnet, &s.l2_network, &s.elastic_ip) {
            (Some(n), None, None) => Ok(NicKind::Subnet(n)),
            (None, Some(n), None) => Ok(NicKind::L2Network(n)),
            (None, None, Some(n)) => Ok(NicKind::ElasticIp(n)),
            (None, None, None) => Err(CniError::new(
                code::INVALID_CONFIG,
                format!(
                    "NetworkInterface {}: names no Subnet, L2Network or ElasticIP; set exactly one",
                    nic.metadata.name.as_deref().unwrap_or("")
                ),
            )),
            _ => Err(CniError::new(
                code::INVALID_CONFIG,
                format!(
                    "NetworkInterface {}: names more than one of subnet, l2Network and elasticIP; set exactly one",
                    nic.metadata.name.as_deref().unwrap_or("")
                ),
            )),
        }
    }
}

/// One kind of Pod NIC.
pub trait NicDriver: Sync {
    /// The datapath port of `nic` on host interface `ifindex`: the same at ADD and when
    /// a restarted daemon attaches it again. `None` while the controller has not
    /// finished the NIC (no VNI, or a held port without its address): a restarted
    /// daemon attaches no port the datapath would drop everything of.
    fn port_spec(
        &self,
        nic: &NetworkInterface,
        container_id: &str,
        ifindex: u32,
    ) -> Option<PortSpec>;

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
    /// port, MTU and address, and for a held port that it is written as its spec.
    fn check(
        &self,
        ctx: &NicContext<'_>,
        nic: &NetworkInterface,
        host: Option<(&str, u32)>,
    ) -> Result<(), CniError> {
        veth_nic::check(ctx, nic, host)?;
        let Some((host, ifindex)) = host else {
            return Ok(());
        };
        let Some(want) = self.port_spec(nic, ctx.container_id, ifindex) else {
            return Ok(());
        };
        if want.kind.held_to().is_none() {
            return Ok(());
        }
        let port = ctx.dataplane.lock().expect("dataplane lock").port(ifindex);
        if !port.is_ok_and(|p| want.written_as(&p)) {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!(
                    "{}: {host} is not a port held to the NIC's MAC and address",
                    nic.spec.interface
                ),
            ));
        }
        Ok(())
    }
}

/// The driver of a NIC's kind.
pub fn driver_for(nic: &NetworkInterface) -> Result<&'static dyn NicDriver, CniError> {
    Ok(match NicKind::of(nic)? {
        NicKind::Subnet(_) => &SubnetNic,
        NicKind::L2Network(_) => &L2NetworkNic,
        NicKind::ElasticIp(_) => &ElasticIpNic,
    })
}

/// Every host-side port link, whatever its kind, tears down the same way today (a
/// veth pair and its port).
pub fn driver_for_port(_alias: &PortAlias) -> &'static dyn NicDriver {
    &L2NetworkNic
}

/// The part of a port every kind shares: its segment (the NIC's VNI) and MTU.
pub(crate) fn base_spec(nic: &NetworkInterface, ifindex: u32, kind: PortKind) -> Option<PortSpec> {
    let status = nic.status.as_ref()?;
    (status.vni != 0).then_some(PortSpec {
        ifindex,
        vni: status.vni,
        mtu: status.mtu,
        peer: true,
        kind,
    })
}

/// A held port's MAC (stable per container and interface) and the NIC's address.
pub(crate) fn held(nic: &NetworkInterface, container_id: &str) -> Option<([u8; 6], Ipv4Addr)> {
    let ip = nic
        .status
        .as_ref()?
        .address
        .split('/')
        .next()?
        .parse()
        .ok()?;
    Some((nic_mac(container_id, &nic.spec.interface), ip))
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
