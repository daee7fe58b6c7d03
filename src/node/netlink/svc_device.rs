//! The Node's Service device (SVC-02): a veth pair in the Node's namespace through
//! which the datapath hands its own stack the connections to backends outside every
//! Subnet, and gets their replies back. [`SERVICE_DEVICE`] receives the translated
//! packets (a redirect to its ingress); the routes to the Nodes' Service source
//! addresses send the replies out of it, to [`SERVICE_PEER`], whose ingress runs
//! `svc_host`: this Node's address by the device with a permanent neighbour (the peer's
//! MAC), every other Node's via that Node's VTEP. Both ends carry [`SERVICE_ALIAS`]
//! and are made once; a later daemon reuses them.
use std::net::{IpAddr, Ipv4Addr};

use rtnetlink::{
    Handle, LinkVeth, RouteMessageBuilder,
    packet_route::{
        link::LinkAttribute,
        neighbour::NeighbourState,
        route::{RouteProtocol, RouteScope},
    },
};

use super::{NetlinkError, link_by_name, own_and_up, req, with_netlink};

pub const SERVICE_DEVICE: &str = "jn-svc";
pub const SERVICE_PEER: &str = "jn-svc-peer";
pub const SERVICE_ALIAS: &str = "juneau:service";

/// The device's ifindex and MAC, and its peer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceDevice {
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub peer_ifindex: u32,
    pub peer_mac: [u8; 6],
}

fn mac_of(link: &rtnetlink::packet_route::link::LinkMessage) -> [u8; 6] {
    link.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Address(m) if m.len() == 6 => {
                let mut out = [0; 6];
                out.copy_from_slice(m);
                Some(out)
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// Makes the pair in the caller's namespace unless it is there (up, owned, no IPv6).
pub fn ensure() -> Result<ServiceDevice, NetlinkError> {
    with_netlink(None, async |handle| {
        if link_by_name(&handle, SERVICE_DEVICE).await.is_err() {
            let veth = LinkVeth::new(SERVICE_DEVICE, SERVICE_PEER)
                .append_extra_attribute(LinkAttribute::NumTxQueues(1))
                .append_extra_attribute(LinkAttribute::NumRxQueues(1))
                .build();
            handle
                .link()
                .add(veth)
                .execute()
                .await
                .map_err(req(format!("create veth {SERVICE_DEVICE}")))?;
        }
        let dev = link_by_name(&handle, SERVICE_DEVICE).await?;
        let peer = link_by_name(&handle, SERVICE_PEER).await?;
        for (l, name) in [(&dev, SERVICE_DEVICE), (&peer, SERVICE_PEER)] {
            own_and_up(&handle, l.header.index, SERVICE_ALIAS, name).await?;
        }
        Ok(ServiceDevice {
            ifindex: dev.header.index,
            mac: mac_of(&dev),
            peer_ifindex: peer.header.index,
            peer_mac: mac_of(&peer),
        })
    })
}

/// The routes of the Service source addresses, as wanted: `own` (this Node's, by the
/// device) and `others` (address, VTEP). Routes of `gone` are removed. Everything is
/// replaced in place, so a repeated call changes nothing.
pub fn set_routes(
    dev: &ServiceDevice,
    own: Option<Ipv4Addr>,
    others: &[(Ipv4Addr, Ipv4Addr)],
    gone: &[Ipv4Addr],
) -> Result<(), NetlinkError> {
    with_netlink(None, async |handle| {
        for ip in gone {
            del_route(&handle, *ip).await?;
        }
        if let Some(ip) = own {
            let route = RouteMessageBuilder::<Ipv4Addr>::new()
                .destination_prefix(ip, 32)
                .output_interface(dev.ifindex)
                .scope(RouteScope::Link);
            replace_route(&handle, route, format!("{ip}/32 dev {SERVICE_DEVICE}")).await?;
            handle
                .neighbours()
                .add(dev.ifindex, IpAddr::V4(ip))
                .link_local_address(&dev.peer_mac)
                .state(NeighbourState::Permanent)
                .replace()
                .execute()
                .await
                .map_err(req(format!("add neighbour {ip} dev {SERVICE_DEVICE}")))?;
        }
        for (ip, vtep) in others {
            let route = RouteMessageBuilder::<Ipv4Addr>::new()
                .destination_prefix(*ip, 32)
                .gateway(*vtep);
            replace_route(&handle, route, format!("{ip}/32 via {vtep}")).await?;
        }
        Ok(())
    })
}

/// Adds `route` (a static one), replacing what holds its destination.
async fn replace_route(
    handle: &Handle,
    route: RouteMessageBuilder<Ipv4Addr>,
    what: String,
) -> Result<(), NetlinkError> {
    handle
        .route()
        .add(route.protocol(RouteProtocol::Static).build())
        .replace()
        .execute()
        .await
        .map_err(req(format!("add route {what}")))
}

async fn del_route(handle: &Handle, ip: Ipv4Addr) -> Result<(), NetlinkError> {
    let route = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(ip, 32)
        .build();
    match handle.route().del(route).execute().await {
        Ok(()) => Ok(()),
        // Gone already: nothing to do.
        Err(rtnetlink::Error::NetlinkError(m)) if m.raw_code() == -libc::ESRCH => Ok(()),
        Err(e) => Err(req(format!("delete route {ip}/32"))(e)),
    }
}
