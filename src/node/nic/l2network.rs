//! An L2Network NIC: a veth port of the segment's switch (frames forwarded by MAC, any
//! EtherType), routed only through the gateway when the segment has one.
use super::{Made, NicContext, NicDriver, base_spec, veth_nic};
use crate::{
    api::NetworkInterface,
    cni::{CniError, CniResult},
    node::{
        dataplane::{PortKind, PortSpec},
        netlink,
    },
};

pub struct L2NetworkNic;

impl NicDriver for L2NetworkNic {
    fn port_spec(&self, nic: &NetworkInterface, _: &str, ifindex: u32) -> Option<PortSpec> {
        base_spec(nic, ifindex, PortKind::Switched)
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
