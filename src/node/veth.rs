//! Pod NIC plumbing: the veth pair between a Pod and its Node.
use std::{
    fs::File,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
};

use rtnetlink::{
    LinkMessageBuilder, LinkUnspec, LinkVeth,
    packet_route::link::{InfoData, InfoVeth},
};

use super::netlink::{self, NetlinkError, link_by_name, own_and_up, quiet, req, with_netlink};

/// The interface alias that marks a host-side veth as made by Juneau. The datapath is
/// attached only to interfaces that carry it (MX-02): never to a NIC another CNI owns.
pub const OWNER_ALIAS: &str = "juneau:port";

/// What to create: `host_name` in the Node namespace, `pod_name` in the Pod's.
#[derive(Clone, Debug)]
pub struct VethSpec {
    pub host_name: String,
    pub host_mac: [u8; 6],
    pub pod_netns: PathBuf,
    pub pod_name: String,
    pub pod_mac: [u8; 6],
    /// Set on both ends (L2-21); `None` keeps the kernel default.
    pub mtu: Option<u32>,
    /// The host end's alias: [`OWNER_ALIAS`], optionally followed by `:<container
    /// id>:<interface>` so that DEL finds what ADD made even after a daemon restart.
    pub alias: String,
}

/// The alias of a Pod NIC's host end.
pub fn alias_for(container_id: &str, interface: &str) -> String {
    format!("{OWNER_ALIAS}:{container_id}:{interface}")
}

/// Creates the pair, the Pod end directly inside the Pod namespace, both ends up.
/// Returns the host-side ifindex. `node_netns` is where the host end lives (`None`: the
/// caller's namespace).
pub fn create(node_netns: Option<&Path>, spec: &VethSpec) -> Result<u32, NetlinkError> {
    let pod_ns = File::open(&spec.pod_netns).map_err(|source| NetlinkError::OpenNetns {
        path: spec.pod_netns.clone(),
        source,
    })?;
    let host_index = with_netlink(node_netns, async |handle| {
        let mut peer = LinkMessageBuilder::<LinkUnspec>::new()
            .name(spec.pod_name.clone())
            .address(spec.pod_mac.to_vec())
            .setns_by_fd(pod_ns.as_raw_fd());
        let mut host =
            LinkVeth::new(&spec.host_name, &spec.pod_name).address(spec.host_mac.to_vec());
        if let Some(mtu) = spec.mtu {
            peer = peer.mtu(mtu);
            host = host.mtu(mtu);
        }
        let host = host
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
            .build();
        handle
            .link()
            .add(host)
            .execute()
            .await
            .map_err(req(format!("create veth {}", spec.host_name)))?;
        let index = link_by_name(&handle, &spec.host_name).await?.header.index;
        quiet(&spec.host_name)?;
        own_and_up(&handle, index, &spec.alias, &spec.host_name).await?;
        Ok(index)
    })?;
    with_netlink(Some(&spec.pod_netns), async |handle| {
        let index = link_by_name(&handle, &spec.pod_name).await?.header.index;
        quiet(&spec.pod_name)?;
        handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(req(format!("set {} up", spec.pod_name)))
    })?;
    Ok(host_index)
}

/// Deletes the host end (the kernel removes its peer). Idempotent.
pub fn delete(node_netns: Option<&Path>, host_name: &str) -> Result<(), NetlinkError> {
    netlink::delete_link(node_netns, host_name)
}
