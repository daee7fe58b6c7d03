//! One CNI ADD's netlink: a current-thread runtime and one rtnetlink connection per
//! namespace the ADD touches (the Node's, the Pod's), opened once and used for every
//! request of the ADD, instead of a thread, a runtime and a socket per request.
//!
//! The Pod's connection is opened while the caller's thread visits the Pod's namespace
//! ([`netns::visit`]: a netlink socket stays bound to the namespace it was created in);
//! it is then driven like the Node's. The caller must be a plain OS thread (never a
//! tokio worker): the agent's handler threads are. The same visit opens the Pod
//! namespace's default `disable_ipv6` sysctl ([`Ipv6Off`]).
//!
//! Interface indexes are looked up by `SIOCGIFINDEX` on a datagram socket of each
//! namespace ([`Session::node_index`], [`Session::pod_index`]): the kernel answers it
//! under RCU, where an `RTM_GETLINK` takes RTNL and, in a burst of Pod starts, waits
//! behind every other sandbox's netlink work for a number it could have read for free.
use std::{
    fs::File,
    future::Future,
    os::fd::{AsRawFd, OwnedFd},
    path::Path,
};

use rtnetlink::Handle;
use tokio::{runtime::Runtime, task::JoinHandle};

use super::{NetlinkError, ipv6_off::Ipv6Off};
use crate::netns;

pub struct Session {
    rt: Runtime,
    node: Handle,
    pod: Option<Handle>,
    /// The Node's namespace (the caller's at [`Session::open`]): where a veth made from
    /// the Pod's side puts its host end.
    node_ns: File,
    /// A datagram socket in each namespace, for [`index_of`].
    node_sock: OwnedFd,
    pod_sock: Option<OwnedFd>,
    /// `net.ipv6.conf.default.disable_ipv6` of the Pod's namespace, opened inside it;
    /// `None` when the kernel has no IPv6 or its write would take RTNL ([`Ipv6Off`]).
    pod_ipv6_default: Option<File>,
    connections: Vec<JoinHandle<()>>,
}

fn connect(
    rt: &tokio::runtime::Handle,
) -> Result<(Handle, impl Future<Output = ()> + Send + use<>), NetlinkError> {
    let _inside = rt.enter();
    let (conn, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Runtime)?;
    Ok((handle, conn))
}

impl Session {
    /// Connects to the calling thread's namespace (the Node's) and, with `pod_ns`, to
    /// that namespace.
    pub fn open(pod_ns: Option<&Path>) -> Result<Session, NetlinkError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(NetlinkError::Runtime)?;
        let (node, conn) = connect(rt.handle())?;
        let node_ns =
            File::open("/proc/thread-self/ns/net").map_err(|source| NetlinkError::OpenNetns {
                path: "/proc/thread-self/ns/net".into(),
                source,
            })?;
        let node_sock = dgram_socket()?;
        let mut connections = vec![rt.spawn(conn)];
        let (pod, pod_sock, pod_ipv6_default) = match pod_ns {
            None => (None, None, None),
            Some(path) => {
                let h = rt.handle();
                let ((pod, conn), sock, ipv6) = netns::visit(path, || {
                    Ok::<_, NetlinkError>((connect(h)?, dgram_socket()?, Ipv6Off::open()?))
                })??;
                connections.push(rt.spawn(conn));
                (Some(pod), Some(sock), ipv6)
            }
        };
        Ok(Session {
            rt,
            node,
            pod,
            node_ns,
            node_sock,
            pod_sock,
            pod_ipv6_default,
            connections,
        })
    }

    /// Switches the Pod namespace's default IPv6 off until the guard is restored;
    /// `None` when NICs are quieted one by one instead (no Pod namespace, an older
    /// kernel, or no IPv6 at all, where there is nothing to quiet).
    pub fn pod_ipv6_off(&self) -> Result<Option<Ipv6Off<'_>>, NetlinkError> {
        self.pod_ipv6_default
            .as_ref()
            .map(Ipv6Off::begin)
            .transpose()
    }

    /// The Node namespace's handle.
    pub fn node(&self) -> &Handle {
        &self.node
    }

    /// The Pod namespace's handle (the session was opened with one).
    pub fn pod(&self) -> &Handle {
        self.pod
            .as_ref()
            .expect("a session for Pod work is opened with the Pod's namespace")
    }

    /// The Node's namespace, for `IFLA_NET_NS_FD`.
    pub fn node_ns(&self) -> &File {
        &self.node_ns
    }

    /// The index of `name` in the Node's namespace (no RTNL: see the module's doc).
    pub fn node_index(&self, name: &str) -> Result<u32, NetlinkError> {
        index_of(&self.node_sock, name)
    }

    /// The index of `name` in the Pod's namespace (the session was opened with one).
    pub fn pod_index(&self, name: &str) -> Result<u32, NetlinkError> {
        let sock = self
            .pod_sock
            .as_ref()
            .expect("a session for Pod work is opened with the Pod's namespace");
        index_of(sock, name)
    }

    /// Runs netlink work to completion on this session's runtime.
    pub fn block_on<T>(&self, work: impl Future<Output = T>) -> T {
        self.rt.block_on(work)
    }
}

/// A datagram socket of the calling thread's namespace: the handle `SIOCGIFINDEX` asks
/// through.
fn dgram_socket() -> Result<OwnedFd, NetlinkError> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| NetlinkError::LookupSocket(e.into()))
}

/// `SIOCGIFINDEX` of `name` in `sock`'s namespace.
fn index_of(sock: &OwnedFd, name: &str) -> Result<u32, NetlinkError> {
    let missing = || NetlinkError::NoSuchLink(name.to_owned());
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(missing());
    }
    // SAFETY: a zeroed ifreq is valid; the name fits with its terminating NUL.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFINDEX reads the name and writes the index into `ifr`, which
    // lives across the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFINDEX, &mut ifr) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENODEV) => missing(),
            _ => NetlinkError::Lookup {
                name: name.to_owned(),
                source: e,
            },
        });
    }
    // SAFETY: the kernel filled the index member.
    let index = unsafe { ifr.ifr_ifru.ifru_ifindex };
    u32::try_from(index).map_err(|_| missing())
}

impl Drop for Session {
    fn drop(&mut self) {
        for c in &self.connections {
            c.abort();
        }
    }
}
