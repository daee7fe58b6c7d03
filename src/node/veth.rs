//! Pod NIC plumbing: the veth pair between a Pod and its Node, made with rtnetlink.
//!
//! Netlink sockets are opened inside the namespace they act on (on a thread that entered
//! it, see [`crate::netns`]), then driven by a current-thread runtime on that same thread.
use std::{
    fs::File,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
};

use futures::TryStreamExt;
use rtnetlink::{
    Handle, LinkMessageBuilder, LinkUnspec, LinkVeth,
    packet_route::link::{InfoData, InfoVeth, LinkAttribute},
};

use crate::netns::{self, NetnsError};

/// The interface alias that marks a host-side veth as made by Juneau. The datapath is
/// attached only to interfaces that carry it (MX-02): never to a NIC another CNI owns.
pub const OWNER_ALIAS: &str = "juneau:port";

#[derive(Debug, thiserror::Error)]
pub enum VethError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("cannot open the Pod network namespace {path}: {source}")]
    PodNetns {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("netlink: {op}: {source}")]
    Netlink {
        op: String,
        source: rtnetlink::Error,
    },
    #[error("no interface named {0}")]
    NoSuchLink(String),
    #[error(
        "interface {0} was not created by Juneau (its alias is not \"{OWNER_ALIAS}\"); Juneau attaches only to its own interfaces"
    )]
    NotOwned(String),
    #[error("cannot write sysctl {path}: {source}")]
    Sysctl {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot start a netlink runtime: {0}")]
    Runtime(std::io::Error),
}

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
}

/// Run `f` with a netlink handle bound to the namespace at `ns` (the caller's own when
/// `None`).
fn with_netlink<T: Send>(
    ns: Option<&Path>,
    f: impl AsyncFnOnce(Handle) -> Result<T, VethError> + Send,
) -> Result<T, VethError> {
    let work = || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(VethError::Runtime)?;
        rt.block_on(async {
            let (conn, handle, _) = rtnetlink::new_connection().map_err(VethError::Runtime)?;
            let task = tokio::spawn(conn);
            let out = f(handle).await;
            task.abort();
            out
        })
    };
    match ns {
        Some(path) => netns::run_in(path, work)?,
        None => std::thread::scope(|s| s.spawn(work).join().expect("netlink thread panicked")),
    }
}

fn nl(op: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> VethError {
    let op = op.into();
    move |source| VethError::Netlink { op, source }
}

async fn link_by_name(
    handle: &Handle,
    name: &str,
) -> Result<rtnetlink::packet_route::link::LinkMessage, VethError> {
    let mut links = handle.link().get().match_name(name.to_owned()).execute();
    match links.try_next().await {
        Ok(Some(link)) => Ok(link),
        Ok(None) | Err(rtnetlink::Error::NetlinkError(_)) => {
            Err(VethError::NoSuchLink(name.to_owned()))
        }
        Err(e) => Err(nl(format!("get link {name}"))(e)),
    }
}

/// Writes a sysctl of the calling thread's network namespace.
fn sysctl(path: &str, value: &str) -> Result<(), VethError> {
    std::fs::write(path, value).map_err(|source| VethError::Sysctl {
        path: path.to_owned(),
        source,
    })
}

/// The host side of a port carries no addresses and must stay silent: no IPv6
/// autoconfiguration, router solicitations or MLD reports leaking into the segment.
fn quiet(ifname: &str) -> Result<(), VethError> {
    sysctl(
        &format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
        "1",
    )
}

/// Creates the pair, the Pod end directly inside the Pod namespace, both ends up.
/// Returns the host-side ifindex. `node_netns` is where the host end lives (`None`: the
/// caller's namespace).
pub fn create(node_netns: Option<&Path>, spec: &VethSpec) -> Result<u32, VethError> {
    let pod_ns = File::open(&spec.pod_netns).map_err(|source| VethError::PodNetns {
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
            .map_err(nl(format!("create veth {}", spec.host_name)))?;
        let index = link_by_name(&handle, &spec.host_name).await?.header.index;
        quiet(&spec.host_name)?;
        // The kernel takes IFLA_IFALIAS on a change, not at creation.
        let owned = LinkUnspec::new_with_index(index)
            .append_extra_attribute(LinkAttribute::IfAlias(OWNER_ALIAS.to_owned()))
            .up()
            .build();
        handle
            .link()
            .set(owned)
            .execute()
            .await
            .map_err(nl(format!("set {} up", spec.host_name)))?;
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
            .map_err(nl(format!("set {} up", spec.pod_name)))
    })?;
    Ok(host_index)
}

/// Deletes the host end (the kernel removes its peer). Deleting what is already gone
/// succeeds: DEL is idempotent.
pub fn delete(node_netns: Option<&Path>, host_name: &str) -> Result<(), VethError> {
    with_netlink(node_netns, async |handle| {
        let index = match link_by_name(&handle, host_name).await {
            Ok(link) => link.header.index,
            Err(VethError::NoSuchLink(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        handle
            .link()
            .del(index)
            .execute()
            .await
            .map_err(nl(format!("delete {host_name}")))
    })
}

/// The ifindex of `name` in the calling thread's namespace, if Juneau created it.
pub fn owned_ifindex(name: &str) -> Result<u32, VethError> {
    with_netlink(None, async |handle| {
        let link = link_by_name(&handle, name).await?;
        let owned = link
            .attributes
            .iter()
            .any(|a| matches!(a, LinkAttribute::IfAlias(alias) if alias == OWNER_ALIAS));
        if owned {
            Ok(link.header.index)
        } else {
            Err(VethError::NotOwned(name.to_owned()))
        }
    })
}
