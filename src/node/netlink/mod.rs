//! rtnetlink plumbing shared by the interfaces the daemon makes. The async `*_on`
//! functions work on a given handle (a [`Session`] opened once per CNI ADD); the plain
//! ones open a connection of their own for a single request (tools, tests).
//!
//! Netlink sockets are opened inside the namespace they act on (on a thread that entered
//! it, see [`crate::netns`]) and driven by a current-thread runtime on that same thread.
use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use rtnetlink::{
    Handle, LinkUnspec,
    packet_route::link::{LinkAttribute, LinkMessage},
};

use crate::netns::{self, NetnsError};

mod filters;
mod ipv6_off;
mod routes;
mod session;
pub mod svc_device;
pub use filters::{BpfFilter, add_clsact, bpf_filters};
pub use ipv6_off::Ipv6Off;
pub use routes::{add_host_route_on, add_route_via_on, add_rule_on, mac_of};
pub use session::Session;

#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("cannot open the network namespace {path}: {source}")]
    OpenNetns {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("netlink: {op}: {source}")]
    Request {
        op: String,
        source: rtnetlink::Error,
    },
    #[error("no interface named {0}")]
    NoSuchLink(String),
    #[error("cannot list the interfaces of this namespace: {0}")]
    ListLinks(std::io::Error),
    #[error("cannot open a socket to look interfaces up by name: {0}")]
    LookupSocket(std::io::Error),
    #[error("cannot look up the index of interface {name}: {source}")]
    Lookup {
        name: String,
        source: std::io::Error,
    },
    #[error(
        "interface {name} was not created by Juneau (its alias is not \"{alias}\"); Juneau attaches only to its own interfaces"
    )]
    NotOwned { name: String, alias: &'static str },
    #[error("cannot open, read or write sysctl {path}: {source}")]
    Sysctl {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot start a netlink runtime: {0}")]
    Runtime(std::io::Error),
}

/// Run `f` with a netlink handle bound to the namespace at `ns` (the caller's own when
/// `None`), on a thread of its own.
pub fn with_netlink<T: Send>(
    ns: Option<&Path>,
    f: impl AsyncFnOnce(Handle) -> Result<T, NetlinkError> + Send,
) -> Result<T, NetlinkError> {
    let work = || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(NetlinkError::Runtime)?;
        rt.block_on(async {
            let (conn, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Runtime)?;
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

pub fn req(op: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> NetlinkError {
    let op = op.into();
    move |source| NetlinkError::Request { op, source }
}

/// The kernel's answer that the link does not exist (ENODEV).
fn no_such_device(e: &rtnetlink::Error) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m) if m.raw_code() == -libc::ENODEV)
}

pub async fn link_by_name(handle: &Handle, name: &str) -> Result<LinkMessage, NetlinkError> {
    let mut links = handle.link().get().match_name(name.to_owned()).execute();
    match links.try_next().await {
        Ok(Some(link)) => Ok(link),
        Ok(None) => Err(NetlinkError::NoSuchLink(name.to_owned())),
        // Only "no such device" means missing: any other refusal (EPERM, ENOBUFS) must
        // not let a DEL or a rollback report a veth removed that is still there.
        Err(e) if no_such_device(&e) => Err(NetlinkError::NoSuchLink(name.to_owned())),
        Err(e) => Err(req(format!("get link {name}"))(e)),
    }
}

/// Writes a sysctl of the calling thread's network namespace.
pub fn sysctl(path: &str, value: &str) -> Result<(), NetlinkError> {
    std::fs::write(path, value).map_err(|source| NetlinkError::Sysctl {
        path: path.to_owned(),
        source,
    })
}

/// An interface of the datapath carries no IPv6 of its own: no autoconfiguration,
/// router solicitations or MLD reports leaking into a segment. A kernel without IPv6
/// (no such sysctl) has nothing to quiet.
pub fn quiet(ifname: &str) -> Result<(), NetlinkError> {
    if !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(());
    }
    sysctl(
        &format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
        "1",
    )
}

/// No IPv6 address of its own for a link (address generation mode "none": no
/// link-local address, so no duplicate address detection, router solicitation or MLD
/// report leaves it). Sent with the message that brings a Node-side link up (the kernel
/// refuses it at creation, before the link has IPv6 state), it costs nothing; the
/// `disable_ipv6` sysctl it replaces there walked /proc/sys/net/ipv6/conf, a directory
/// of every interface of the Node, about a tenth of an ADD's daemon time with a few
/// hundred Pods.
pub fn no_ipv6_addresses() -> LinkAttribute {
    use rtnetlink::packet_route::link::{AfSpecInet6, AfSpecUnspec};
    // IN6_ADDR_GEN_MODE_NONE (include/uapi/linux/if_link.h)
    LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(vec![AfSpecInet6::AddrGenMode(1)])])
}

/// Marks `index` as Juneau's with `alias`, without IPv6 addresses, and brings it up. (The kernel takes
/// IFLA_IFALIAS on a change, not at creation.)
pub async fn own_and_up(
    handle: &Handle,
    index: u32,
    alias: &str,
    name: &str,
) -> Result<(), NetlinkError> {
    let msg = LinkUnspec::new_with_index(index)
        .append_extra_attribute(LinkAttribute::IfAlias(alias.to_owned()))
        .append_extra_attribute(no_ipv6_addresses())
        .up()
        .build();
    handle
        .link()
        .set(msg)
        .execute()
        .await
        .map_err(req(format!("set {name} up")))
}

/// Deletes `name` in `ns`; deleting what is already gone succeeds (idempotent).
pub fn delete_link(ns: Option<&Path>, name: &str) -> Result<(), NetlinkError> {
    with_netlink(ns, async |handle| delete_link_on(&handle, name).await)
}

/// [`delete_link`] through `handle`'s namespace.
pub async fn delete_link_on(handle: &Handle, name: &str) -> Result<(), NetlinkError> {
    let index = match link_by_name(handle, name).await {
        Ok(link) => link.header.index,
        Err(NetlinkError::NoSuchLink(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    match handle.link().del(index).execute().await {
        // Gone between the lookup and the delete (its namespace going away): as wanted.
        Err(e) if no_such_device(&e) => Ok(()),
        other => other.map_err(req(format!("delete {name}"))),
    }
}

/// Links of the calling thread's namespace whose alias starts with `prefix`:
/// (name, ifindex, alias).
pub fn links_with_alias(prefix: &str) -> Result<Vec<(String, u32, String)>, NetlinkError> {
    with_netlink(None, async |handle| {
        let mut links = handle.link().get().execute();
        let mut out = Vec::new();
        while let Some(link) = links.try_next().await.map_err(req("list links"))? {
            let mut name = String::new();
            let mut alias = None;
            for a in &link.attributes {
                match a {
                    LinkAttribute::IfName(n) => name = n.clone(),
                    LinkAttribute::IfAlias(a) if a.starts_with(prefix) => alias = Some(a.clone()),
                    _ => {}
                }
            }
            if let Some(alias) = alias {
                out.push((name, link.header.index, alias));
            }
        }
        Ok(out)
    })
}

/// Adds `net` (its address and prefix) to interface `index` (named `ifname`) of
/// `handle`'s namespace. Callers take the index from [`Session::pod_index`] or
/// [`Session::node_index`], not from a lookup that takes RTNL.
pub async fn add_address_on(
    handle: &Handle,
    (index, ifname): (u32, &str),
    net: ipnet::Ipv4Net,
) -> Result<(), NetlinkError> {
    handle
        .address()
        .add(index, std::net::IpAddr::V4(net.addr()), net.prefix_len())
        .execute()
        .await
        .map_err(req(format!("add {net} to {ifname}")))
}

/// Adds the default route via `gw` in `handle`'s namespace (main table).
pub async fn add_default_route_on(
    handle: &Handle,
    gw: std::net::Ipv4Addr,
) -> Result<(), NetlinkError> {
    let route = rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new()
        .gateway(gw)
        .build();
    handle
        .route()
        .add(route)
        .execute()
        .await
        .map_err(req(format!("add default route via {gw}")))
}

/// Adds the default route via `gw` in `ns` (main table).
pub fn add_default_route(ns: &Path, gw: std::net::Ipv4Addr) -> Result<(), NetlinkError> {
    with_netlink(Some(ns), async |handle| {
        add_default_route_on(&handle, gw).await
    })
}

/// The addresses (a.b.c.d/len) of `ifname` in `ns`.
pub fn addresses(ns: &Path, ifname: &str) -> Result<Vec<String>, NetlinkError> {
    use rtnetlink::packet_route::address::AddressAttribute;
    with_netlink(Some(ns), async |handle| {
        let index = link_by_name(&handle, ifname).await?.header.index;
        let mut addrs = handle
            .address()
            .get()
            .set_link_index_filter(index)
            .execute();
        let mut out = Vec::new();
        while let Some(a) = addrs.try_next().await.map_err(req("list addresses"))? {
            for attr in &a.attributes {
                if let AddressAttribute::Address(ip) = attr {
                    out.push(format!("{ip}/{}", a.header.prefix_len));
                }
            }
        }
        Ok(out)
    })
}

/// Every interface of the calling thread's namespace: (name, ifindex). A failed
/// listing is an error, never an empty namespace (a restart would take every pinned
/// port for gone).
pub fn all_links() -> Result<Vec<(String, u32)>, NetlinkError> {
    let mut out = Vec::new();
    // SAFETY: if_nameindex returns an array ended by a zero entry, freed below; the
    // names are NUL-terminated C strings inside it.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return Err(NetlinkError::ListLinks(std::io::Error::last_os_error()));
        }
        let mut p = list;
        while (*p).if_index != 0 {
            let name = std::ffi::CStr::from_ptr((*p).if_name)
                .to_string_lossy()
                .into_owned();
            out.push((name, (*p).if_index));
            p = p.add(1);
        }
        libc::if_freenameindex(list);
    }
    Ok(out)
}

/// The MTU and IPv4 addresses (a.b.c.d/len) of `name` in the calling thread's
/// namespace.
pub fn mtu_and_ipv4(name: &str) -> Result<(u32, Vec<ipnet::Ipv4Net>), NetlinkError> {
    use rtnetlink::packet_route::address::AddressAttribute;
    with_netlink(None, async |handle| {
        let link = link_by_name(&handle, name).await?;
        let mtu = link
            .attributes
            .iter()
            .find_map(|a| match a {
                LinkAttribute::Mtu(m) => Some(*m),
                _ => None,
            })
            .unwrap_or(1500);
        let mut addrs = handle
            .address()
            .get()
            .set_link_index_filter(link.header.index)
            .execute();
        let mut out = Vec::new();
        while let Some(a) = addrs.try_next().await.map_err(req("list addresses"))? {
            for attr in &a.attributes {
                if let AddressAttribute::Address(std::net::IpAddr::V4(ip)) = attr
                    && let Ok(net) = ipnet::Ipv4Net::new(*ip, a.header.prefix_len)
                {
                    out.push(net);
                }
            }
        }
        Ok((mtu, out))
    })
}

/// Every interface index of the calling thread's namespace.
pub fn all_ifindexes() -> Result<std::collections::BTreeSet<u32>, NetlinkError> {
    Ok(all_links()?.into_iter().map(|(_, i)| i).collect())
}

/// The index of `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> Result<u32, NetlinkError> {
    let c = std::ffi::CString::new(name).map_err(|_| NetlinkError::NoSuchLink(name.into()))?;
    // SAFETY: a C string we own.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(NetlinkError::NoSuchLink(name.into())),
        i => Ok(i),
    }
}

/// The ifindex of `name` in the calling thread's namespace, if Juneau made it (its
/// alias starts with `alias`).
pub fn owned_ifindex(name: &str, alias: &'static str) -> Result<u32, NetlinkError> {
    with_netlink(None, async |handle| {
        let link = link_by_name(&handle, name).await?;
        let owned = link
            .attributes
            .iter()
            .any(|a| matches!(a, LinkAttribute::IfAlias(a) if a.starts_with(alias)));
        if owned {
            Ok(link.header.index)
        } else {
            Err(NetlinkError::NotOwned {
                name: name.to_owned(),
                alias,
            })
        }
    })
}
