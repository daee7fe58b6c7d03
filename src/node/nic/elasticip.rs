//! A direct ElasticIP NIC (seed 003): a veth whose Pod end holds `<EIP>/32` with the
//! default route via 169.254.0.1 on the link (in table N chosen by `from <EIP>` for a
//! secondary NIC), and whose host end has the network's gateway MAC (every direct NIC
//! of the network sees the same one) and is a port of the ElasticIP program. eth0's
//! ElasticIP also gets the Node route `<EIP>/32 dev <host veth>` for kubelet probes,
//! gone with the veth (EIP-18).
use std::net::Ipv4Addr;

use super::{Made, NicContext, NicDriver, base_spec, held, veth_nic};
use crate::{
    api::NetworkInterface,
    cni::{CniError, CniResult, code},
    node::{
        dataplane::{PortKind, PortSpec},
        netlink, veth,
    },
};

pub struct ElasticIpNic;

impl NicDriver for ElasticIpNic {
    /// Held to the Pod's MAC and the ElasticIP, on its network's VNI: none until the
    /// ElasticIP is bound.
    fn port_spec(
        &self,
        nic: &NetworkInterface,
        container_id: &str,
        ifindex: u32,
    ) -> Option<PortSpec> {
        let (mac, ip) = held(nic, container_id)?;
        base_spec(nic, ifindex, PortKind::ElasticIp { mac, ip })
    }

    fn setup(
        &self,
        ctx: &NicContext<'_>,
        nl: &netlink::Session,
        nic: &NetworkInterface,
        made: &mut Made,
        result: &mut CniResult,
    ) -> Result<(), CniError> {
        let status = nic.status.clone().unwrap_or_default();
        let (Some(eip), true) = (nic.ip(), status.vni != 0) else {
            return Err(CniError::new(
                code::TRY_AGAIN_LATER,
                format!(
                    "NetworkInterface {}: waiting for its ElasticIP (address {:?}, network {}): {}",
                    nic.metadata.name.as_deref().unwrap_or(""),
                    status.address.map(|a| a.to_string()).unwrap_or_default(),
                    status.vni,
                    status
                        .conditions
                        .first()
                        .map(|c| c.message.as_str())
                        .unwrap_or("")
                ),
            ));
        };
        let gateway = juneau_common::eip::gateway_mac(status.vni);
        veth_nic::setup(ctx, nl, nic, made, result, Some(gateway), self)?;
        // No reverse-path check on the veth: a secondary NIC's ElasticIP has no Node
        // route back to it, and on an interface without IPv4 addresses even the loose
        // check (2) refuses every source not routed to it (Cilium #13130). The Node's
        // `all` setting must stay 0 too (the kernel applies the larger of the two).
        let host = veth::host_name(ctx.container_id, &nic.spec.interface);
        netlink::sysctl(&format!("/proc/sys/net/ipv4/conf/{host}/rp_filter"), "0")
            .map_err(|e| super::io(format!("cannot set rp_filter on {host}"))(e.to_string()))?;
        for rule in &status.rules {
            let from: Ipv4Addr = rule.from.parse().map_err(|_| {
                CniError::new(
                    code::INVALID_CONFIG,
                    format!("rule source {:?} is not IPv4", rule.from),
                )
            })?;
            nl.block_on(netlink::add_rule_on(
                nl.pod(),
                from,
                rule.table,
                rule.priority,
            ))
            .map_err(|e| super::io("cannot add the ElasticIP's rule")(e.to_string()))?;
        }
        if nic.spec.interface == "eth0" {
            let route = nl.node_index(&host).and_then(|index| {
                nl.block_on(netlink::add_host_route_on(
                    nl.node(),
                    (index, &host),
                    eip,
                    None,
                ))
            });
            route.map_err(|e| super::io(format!("cannot route {eip} to {host}"))(e.to_string()))?;
        }
        Ok(())
    }
}
