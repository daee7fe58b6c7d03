//! NIC kinds behind one driver interface (netavark's per-driver setup and teardown):
//! the agent picks the driver from the NetworkInterface and never plumbs a kind
//! itself. `l2network`, `subnet` and `elasticip` (all veth pairs: `veth_nic`).
mod elasticip;
mod l2network;
mod subnet;
mod times;
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
pub use times::{AddTimes, Part, Sched, Step};

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
    /// Where the call's time goes.
    pub times: AddTimes,
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
        // A NIC the controller no longer calls finished (a held port without its
        // address) is not as setup left it.
        let want = self
            .port_spec(nic, ctx.container_id, ifindex)
            .ok_or_else(|| veth_nic::not_ready(nic))?;
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

/// Removes a NIC found by its host link (a CNI DEL, or a Pod gone): every kind is a
/// veth pair and its port, so one teardown serves all (a kind of another shape would
/// read its kind from the link's alias); every error is collected, none stops the
/// rest.
pub fn teardown_port(
    dataplane: &Mutex<Dataplane>,
    host: &str,
    ifindex: u32,
    alias: &PortAlias,
) -> Vec<String> {
    veth_nic::teardown(dataplane, host, ifindex, alias)
}

/// The part of a port every kind shares: its segment (the NIC's VNI) and MTU.
pub(crate) fn base_spec(nic: &NetworkInterface, ifindex: u32, kind: PortKind) -> Option<PortSpec> {
    let status = nic.status.as_ref()?;
    (status.vni != 0).then_some(PortSpec {
        ifindex,
        vni: status.vni,
        mtu: status.mtu,
        peer: true,
        security_groups: !nic.spec.security_groups.is_empty(),
        kind,
    })
}

/// A held port's MAC (stable per container and interface) and the NIC's address.
pub(crate) fn held(nic: &NetworkInterface, container_id: &str) -> Option<([u8; 6], Ipv4Addr)> {
    Some((nic_mac(container_id, &nic.spec.interface), nic.ip()?))
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

    use crate::api::networkinterface::{NetworkInterfaceSpec, NetworkInterfaceStatus};
    use juneau_common::{
        PortConfig,
        port::{PORT_ACTIVE, PORT_EIP, PORT_ROUTED},
    };

    fn nic(subnet: bool, l2: bool, eip: bool) -> NetworkInterface {
        let mut n = NetworkInterface::new(
            "p.eth0",
            NetworkInterfaceSpec {
                interface: "eth0".into(),
                subnet: subnet.then(|| "web".into()),
                l2_network: l2.then(|| "lab".into()),
                elastic_ip: eip.then(|| "pub".into()),
                ..Default::default()
            },
        );
        n.status = Some(NetworkInterfaceStatus {
            vni: 7,
            address: "10.1.0.5/24".parse().ok(),
            ..Default::default()
        });
        n
    }

    /// A NIC names exactly one of a Subnet, an L2Network and an ElasticIP; anything else
    /// is refused by name with the fix.
    #[test]
    fn mx_01_a_nic_kind_is_exactly_one_of_subnet_l2network_elastic_ip() {
        assert_eq!(
            NicKind::of(&nic(true, false, false)).unwrap(),
            NicKind::Subnet("web")
        );
        assert_eq!(
            NicKind::of(&nic(false, true, false)).unwrap(),
            NicKind::L2Network("lab")
        );
        assert_eq!(
            NicKind::of(&nic(false, false, true)).unwrap(),
            NicKind::ElasticIp("pub")
        );
        let e = NicKind::of(&nic(true, true, false)).unwrap_err();
        assert!(
            e.msg.contains("more than one") && e.msg.contains("set exactly one"),
            "{}",
            e.msg
        );
        let e = NicKind::of(&nic(false, false, false)).unwrap_err();
        assert!(e.msg.contains("names no Subnet"), "{}", e.msg);
    }

    /// Each driver owns its port: the kind bits come from `PortKind`, a held port is
    /// held to the NIC's MAC and address, and a port written otherwise does not pass
    /// as written.
    #[test]
    fn l2_15_eip_16_each_driver_owns_its_port_spec() {
        let n = nic(true, false, false);
        let s = SubnetNic.port_spec(&n, "cid", 9).unwrap();
        assert_eq!(s.kind.flags(), PORT_ROUTED);
        let (mac, ip) = s.kind.held_to().unwrap();
        assert_eq!(
            (mac, ip),
            (nic_mac("cid", "eth0"), "10.1.0.5".parse().unwrap())
        );
        let e = ElasticIpNic.port_spec(&n, "cid", 9).unwrap();
        assert_eq!(e.kind.flags(), PORT_ROUTED | PORT_EIP);
        let l = L2NetworkNic.port_spec(&n, "cid", 9).unwrap();
        assert_eq!((l.kind, l.kind.flags()), (PortKind::Switched, 0));
        let mut written = PortConfig {
            vni: 7,
            flags: PORT_ACTIVE | PORT_ROUTED,
            own_mac: juneau_common::FdbKey::new(mac),
            own_ip: u32::from_ne_bytes(ip.octets()),
            ..Default::default()
        };
        assert!(s.written_as(&written));
        assert!(!e.written_as(&written), "an ElasticIP port needs its bit");
        assert!(!l.written_as(&written), "a switched port is not routed");
        written.own_ip = 0;
        assert!(!s.written_as(&written), "held to its address");
        let mut unready = n.clone();
        unready.status.as_mut().unwrap().address = None;
        assert!(SubnetNic.port_spec(&unready, "cid", 9).is_none());
        assert!(L2NetworkNic.port_spec(&unready, "cid", 9).is_some());
    }

    #[test]
    fn mx_01_nic_macs_are_stable_and_locally_administered_unicast() {
        let m = nic_mac("abc", "eth1");
        assert_eq!(m, nic_mac("abc", "eth1"));
        assert_ne!(m, nic_mac("abc", "eth2"));
        assert_eq!(m[0] & 0x03, 0x02, "locally administered, unicast");
    }
}
