//! The Node's VXLAN device in external (collect_md) mode: one device for every segment
//! and every other Node; the datapath sets VNI and remote VTEP per frame.
use std::{net::Ipv4Addr, path::Path};

use rtnetlink::{LinkMessageBuilder, LinkVxlan};

use super::netlink::{NetlinkError, link_by_name, own_and_up, quiet, req, with_netlink};

/// Alias of the VXLAN device Juneau made.
pub const OWNER_ALIAS: &str = "juneau:vxlan";
/// IANA VXLAN port.
pub const VXLAN_PORT: u16 = 4789;

#[derive(Clone, Debug)]
pub struct VxlanSpec {
    pub name: String,
    /// Underlay interface the tunnel leaves by.
    pub underlay: String,
    /// This Node's VTEP address (on the underlay interface).
    pub local: Ipv4Addr,
    /// Largest inner frame payload: the underlay MTU less 50 bytes of encapsulation.
    pub mtu: u32,
}

/// The device as a starting daemon wants it: kept when Juneau made it before (a
/// restart must not take the overlay down), created otherwise. A device of that name
/// that Juneau did not make is refused (MX-02).
pub fn ensure(node_netns: Option<&Path>, spec: &VxlanSpec) -> Result<u32, NetlinkError> {
    let existing = with_netlink(node_netns, async |handle| {
        match link_by_name(&handle, &spec.name).await {
            Ok(link) => Ok(Some(link)),
            Err(NetlinkError::NoSuchLink(_)) => Ok(None),
            Err(e) => Err(e),
        }
    })?;
    match existing {
        None => create(node_netns, spec),
        Some(link) => {
            let ours = link.attributes.iter().any(|a| {
                matches!(a, rtnetlink::packet_route::link::LinkAttribute::IfAlias(x) if x == OWNER_ALIAS)
            });
            if ours {
                Ok(link.header.index)
            } else {
                Err(NetlinkError::NotOwned {
                    name: spec.name.clone(),
                    alias: OWNER_ALIAS,
                })
            }
        }
    }
}

/// Creates the device (up, quiet) in `node_netns` and returns its ifindex.
pub fn create(node_netns: Option<&Path>, spec: &VxlanSpec) -> Result<u32, NetlinkError> {
    with_netlink(node_netns, async |handle| {
        let underlay = link_by_name(&handle, &spec.underlay).await?.header.index;
        let msg = LinkMessageBuilder::<LinkVxlan>::new(&spec.name)
            .collect_metadata(true)
            .port(VXLAN_PORT)
            .dev(underlay)
            .local(spec.local)
            .learning(false)
            .mtu(spec.mtu)
            .build();
        handle
            .link()
            .add(msg)
            .execute()
            .await
            .map_err(req(format!("create vxlan {}", spec.name)))?;
        let index = link_by_name(&handle, &spec.name).await?.header.index;
        quiet(&spec.name)?;
        own_and_up(&handle, index, OWNER_ALIAS, &spec.name).await?;
        Ok(index)
    })
}
