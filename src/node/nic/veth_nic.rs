//! What every veth NIC shares, whatever its segment: a veth pair whose host end is a
//! datapath port, the Pod end addressed from the segment's CIDR with eth0's default
//! route (L2-15) when the segment has one, the segment's MTU on both ends when it sets
//! one (L2-21). The drivers of each kind say only what their port is.
use std::{net::Ipv4Addr, sync::Mutex};

use super::{Made, NicContext, NicDriver, Part, Step, io, nic_mac};
use crate::{
    api::NetworkInterface,
    cni::{CniError, CniResult, Interface, IpConfig, RouteConfig, code},
    node::{
        Dataplane, netlink,
        veth::{self, PortAlias, VethSpec},
    },
};

/// A NIC the controller has not finished: no VNI yet, or a held port without its
/// address.
pub(super) fn not_ready(nic: &NetworkInterface) -> CniError {
    let status = nic.status.clone().unwrap_or_default();
    CniError::new(
        code::TRY_AGAIN_LATER,
        format!(
            "NetworkInterface {}: not allocated yet (network {}, address {:?}): {}",
            nic.metadata.name.as_deref().unwrap_or(""),
            status.vni,
            status.address.map(|a| a.to_string()).unwrap_or_default(),
            status
                .conditions
                .first()
                .map(|c| c.message.as_str())
                .unwrap_or("the controller has not written its status")
        ),
    )
}

/// Makes the veth pair of `nic`, addresses and routes its Pod end, and attaches the
/// datapath to its host end as the port `driver` says (given the new ifindex).
pub fn setup(
    ctx: &NicContext<'_>,
    nl: &netlink::Session,
    nic: &NetworkInterface,
    made: &mut Made,
    result: &mut CniResult,
    host_mac: Option<[u8; 6]>,
    driver: &dyn NicDriver,
) -> Result<(), CniError> {
    // Checked before anything is made: the port must be writable once the veth is.
    if driver.port_spec(nic, ctx.container_id, 0).is_none() {
        return Err(not_ready(nic));
    }
    let status = nic.status.clone().unwrap_or_default();
    let iface = nic.spec.interface.clone();
    let host = veth::host_name(ctx.container_id, &iface);
    let mac = nic_mac(ctx.container_id, &iface);
    let alias = PortAlias {
        container_id: ctx.container_id.to_owned(),
        interface: iface.clone(),
        namespace: ctx.namespace.to_owned(),
        pod: ctx.pod.to_owned(),
    };
    if alias.render().len() > veth::MAX_ALIAS {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            format!(
                "{}/{}: the namespace and Pod names are too long to record on the host veth ({} bytes of alias, the kernel keeps {}); shorten the Pod name",
                ctx.namespace,
                ctx.pod,
                alias.render().len(),
                veth::MAX_ALIAS
            ),
        ));
    }
    let spec = VethSpec {
        host_name: host.clone(),
        host_mac: host_mac.unwrap_or_else(|| nic_mac(ctx.container_id, &format!("{iface}-host"))),
        pod_netns: ctx.netns.to_owned(),
        pod_name: iface.clone(),
        pod_mac: mac,
        mtu: (status.mtu != 0).then_some(status.mtu),
        alias: alias.render(),
        clsact: ctx.port_filters,
    };
    let pair = Step::now();
    let ifindex = veth::create_on(nl, &spec)
        .map_err(|e| io(format!("cannot create the veth pair for {iface}"))(e.to_string()))?;
    ctx.times.add(Part::Veth, pair);
    let routes = Step::now();
    made.links.push(host.clone());
    result.interfaces.push(Interface {
        name: host.clone(),
        mac: crate::format_mac(&spec.host_mac),
        mtu: spec.mtu,
        sandbox: None,
    });
    result.interfaces.push(Interface {
        name: iface.clone(),
        mac: crate::format_mac(&mac),
        mtu: spec.mtu,
        sandbox: Some(ctx.netns.display().to_string()),
    });
    let pod_end = nl
        .pod_index(&iface)
        .map_err(|e| io(format!("cannot find {iface} in the Pod"))(e.to_string()))?;
    if let Some(address) = status.address {
        nl.block_on(netlink::add_address_on(
            nl.pod(),
            (pod_end, &iface),
            address,
        ))
        .map_err(|e| io(format!("cannot address {iface}"))(e.to_string()))?;
        result.ips.push(IpConfig {
            address: address.to_string(),
            gateway: status.routes.first().map(|r| r.gw.clone()),
            interface: result.interfaces.len() - 1,
        });
    }
    for r in &status.routes {
        let gw: Ipv4Addr = r.gw.parse().map_err(|_| {
            CniError::new(
                code::INVALID_CONFIG,
                format!("route gateway {:?} is not IPv4", r.gw),
            )
        })?;
        let added = if r.on_link || r.table != 0 {
            let dst: ipnet::Ipv4Net = r.dst.parse().map_err(|_| {
                CniError::new(
                    code::INVALID_CONFIG,
                    format!("route destination {:?} is not an IPv4 CIDR", r.dst),
                )
            })?;
            nl.block_on(netlink::add_route_via_on(
                nl.pod(),
                (pod_end, &iface),
                dst,
                gw,
                r.on_link,
                r.table,
            ))
        } else {
            nl.block_on(netlink::add_default_route_on(nl.pod(), gw))
        };
        added.map_err(|e| io(format!("cannot add {iface}'s route to {}", r.dst))(e.to_string()))?;
        result.routes.push(RouteConfig {
            dst: r.dst.clone(),
            gw: Some(r.gw.clone()),
        });
    }
    ctx.times.add(Part::PodRoutes, routes);
    let port = driver
        .port_spec(nic, ctx.container_id, ifindex)
        .ok_or_else(|| not_ready(nic))?;
    let waited = Step::now();
    let mut dp = ctx.dataplane.lock().expect("dataplane lock");
    ctx.times.add(Part::Lock, waited);
    let attach = Step::now();
    let attached = dp.attach_owned_port(&host, port);
    drop(dp);
    ctx.times.add(Part::Attach, attach);
    attached.map_err(|e| io(format!("cannot attach the datapath to {host}"))(e.to_string()))?;
    made.ports.push(ifindex);
    Ok(())
}

/// Removes the port and its veth pair; every error is collected.
pub fn teardown(
    dataplane: &Mutex<Dataplane>,
    host: &str,
    ifindex: u32,
    _alias: &PortAlias,
) -> Vec<String> {
    let mut errors = Vec::new();
    if let Err(e) = dataplane
        .lock()
        .expect("dataplane lock")
        .remove_port(ifindex)
    {
        errors.push(e.to_string());
    }
    if let Err(e) = veth::delete(None, host) {
        errors.push(e.to_string());
    }
    errors
}

/// Checks the veth pair, the port, the MTU and the address of `nic` (CNI CHECK).
pub fn check(
    ctx: &NicContext<'_>,
    nic: &NetworkInterface,
    host: Option<(&str, u32)>,
) -> Result<(), CniError> {
    let iface = &nic.spec.interface;
    let Some((host, ifindex)) = host else {
        return Err(CniError::new(
            code::UNKNOWN_CONTAINER,
            format!(
                "{iface}: host veth {} is missing",
                veth::host_name(ctx.container_id, iface)
            ),
        ));
    };
    let port = ctx.dataplane.lock().expect("dataplane lock").port(ifindex);
    match port {
        Ok(p) if p.flags & juneau_common::port::PORT_ACTIVE != 0 => {}
        Ok(_) => {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!("{iface}: {host} is not an active datapath port"),
            ));
        }
        Err(e) => {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!("{iface}: cannot read the datapath port of {host}"),
            )
            .details(e.to_string()));
        }
    }
    let status = nic.status.clone().unwrap_or_default();
    if status.mtu != 0 {
        // L2-21: both ends keep the segment's MTU.
        let host_mtu = netlink::mtu_and_ipv4(host)
            .map_err(|e| io(format!("cannot read {host}"))(e.to_string()))?
            .0;
        let pod_mtu = crate::netns::run_in(ctx.netns, || netlink::mtu_and_ipv4(iface))
            .map_err(|e| {
                io(format!("cannot enter the Pod's namespace for {iface}"))(e.to_string())
            })?
            .map_err(|e| io(format!("cannot read {iface} in the Pod"))(e.to_string()))?
            .0;
        for (side, mtu) in [(host, host_mtu), (iface.as_str(), pod_mtu)] {
            if mtu != status.mtu {
                return Err(CniError::new(
                    code::IO_FAILURE,
                    format!(
                        "{iface}: {side} has MTU {mtu}, the segment's is {}",
                        status.mtu
                    ),
                ));
            }
        }
    }
    if let Some(want) = status.address {
        let have = netlink::addresses(ctx.netns, iface)
            .map_err(|e| io("cannot read the Pod's addresses")(e.to_string()))?;
        if !have.contains(&want.to_string()) {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!("{iface}: address {want} is missing in the Pod (has {have:?})"),
            ));
        }
    }
    Ok(())
}
