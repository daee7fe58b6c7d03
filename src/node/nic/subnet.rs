//! A Subnet NIC: a routed veth port. The Pod gets the Subnet's address and a default
//! route via its gateway; its port sends everything to the router (ARP for the gateway
//! and its Subnet peers answered on this Node, IPv4 routed by address) and accepts only
//! its own MAC and address as sources. No Linux bridge and no kernel route on the Node.
use super::{Made, NicContext, NicDriver, base_spec, held, veth_nic};
use crate::{
    api::NetworkInterface,
    cni::{CniError, CniResult},
    node::{
        dataplane::{PortKind, PortSpec},
        netlink,
    },
};

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
        veth_nic::setup(ctx, nl, nic, made, result, None, self)
    }
}
