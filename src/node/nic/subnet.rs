//! A Subnet NIC: a routed veth port. The Pod gets the Subnet's address and a default
//! route via its gateway; its port sends everything to the router (ARP for the gateway
//! and its Subnet peers answered on this Node, IPv4 routed by address) and accepts only
//! its own MAC and address as sources. No Linux bridge. The one kernel route on the
//! Node: a default-Subnet eth0's `<address>/32 dev <host veth> src <Node>`, the door
//! the kubelet's probes take (the replies come back by `gw::node`); other Vpcs may
//! reuse any range, so their Pods get none (seed 000: `--enable-probe-rewrite`).
use std::net::Ipv4Addr;

use super::{Made, NicContext, NicDriver, base_spec, held, veth_nic};
use crate::{
    api::{DEFAULT_VPC, NetworkInterface},
    cni::{CniError, CniResult},
    node::{
        dataplane::{PortKind, PortSpec},
        netlink, veth,
    },
};

/// The address the Node routes to `nic`'s veth: eth0 on the default Subnet only.
fn node_door(nic: &NetworkInterface) -> Option<Ipv4Addr> {
    if nic.spec.interface != "eth0" || nic.spec.subnet.as_deref() != Some(DEFAULT_VPC) {
        return None;
    }
    let address = nic.status.as_ref()?.address?;
    Some(address.addr())
}

pub struct SubnetNic;

impl NicDriver for SubnetNic {
    /// Held to the NIC's MAC and address: none until the controller allocated it.
    fn port_spec(
        &self,
        nic: &NetworkInterface,
        container_id: &str,
        ifindex: u32,
    ) -> Option<PortSpec> {
        let (mac, ip) = held(nic, container_id)?;
        base_spec(nic, ifindex, PortKind::Subnet { mac, ip })
    }

    fn setup(
        &self,
        ctx: &NicContext<'_>,
        nl: &netlink::Session,
        nic: &NetworkInterface,
        made: &mut Made,
        result: &mut CniResult,
    ) -> Result<(), CniError> {
        veth_nic::setup(ctx, nl, nic, made, result, None, self)?;
        if let Some(ip) = node_door(nic) {
            let door = super::Step::now();
            let host = veth::host_name(ctx.container_id, &nic.spec.interface);
            // The Pod answers from its router to the Node's address (`gw::node`): the
            // veth has none, so no reverse-path check on it either (EIP-18's reason).
            netlink::sysctl(&format!("/proc/sys/net/ipv4/conf/{host}/rp_filter"), "0")
                .map_err(|e| super::io(format!("cannot set rp_filter on {host}"))(e.to_string()))?;
            let route = nl.node_index(&host).and_then(|index| {
                nl.block_on(netlink::add_host_route_on(
                    nl.node(),
                    (index, &host),
                    ip,
                    Some(ctx.node_ip),
                ))
            });
            route.map_err(|e| super::io(format!("cannot route {ip} to {host}"))(e.to_string()))?;
            ctx.times.add(super::Part::Door, door);
        }
        Ok(())
    }
}
