//! A Subnet NIC: a routed veth port. The Pod gets the Subnet's address and a default
//! route via its gateway; its port sends everything to the router (ARP for the gateway
//! and its Subnet peers answered on this Node, IPv4 routed by address) and accepts only
//! its own MAC and address as sources. No Linux bridge and no kernel route on the Node.
use super::{Made, NicContext, NicDriver, port_spec, veth_nic};
use crate::{
    api::NetworkInterface,
    cni::{CniError, CniResult, code},
    node::netlink,
};

pub struct SubnetNic;

impl NicDriver for SubnetNic {
    fn setup(
        &self,
        ctx: &NicContext<'_>,
        nl: &netlink::Session,
        nic: &NetworkInterface,
        made: &mut Made,
        result: &mut CniResult,
    ) -> Result<(), CniError> {
        let spec = port_spec(nic, ctx.container_id, 0);
        if spec.routed.is_none() {
            return Err(CniError::new(
                code::TRY_AGAIN_LATER,
                format!(
                    "NetworkInterface {}: a Subnet NIC needs its address first (status.address is {:?}); the controller has not allocated it yet",
                    nic.metadata.name.as_deref().unwrap_or(""),
                    nic.status
                        .as_ref()
                        .map(|s| s.address.as_str())
                        .unwrap_or("")
                ),
            ));
        }
        veth_nic::setup(ctx, nl, nic, made, result, None, |ifindex| {
            port_spec(nic, ctx.container_id, ifindex)
        })
    }

    fn check(
        &self,
        ctx: &NicContext<'_>,
        nic: &NetworkInterface,
        host: Option<(&str, u32)>,
    ) -> Result<(), CniError> {
        super::veth_nic::check(ctx, nic, host)?;
        let Some((host, ifindex)) = host else {
            return Ok(());
        };
        let want = port_spec(nic, ctx.container_id, ifindex);
        let port = ctx.dataplane.lock().expect("dataplane lock").port(ifindex);
        let held = want.routed.is_some() && port.is_ok_and(|p| want.written_as(&p));
        if !held {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!(
                    "{}: {host} is not a routed port held to the NIC's MAC and address",
                    nic.spec.interface
                ),
            ));
        }
        Ok(())
    }
}
