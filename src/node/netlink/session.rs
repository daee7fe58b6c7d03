//! One CNI ADD's netlink: a current-thread runtime and one rtnetlink connection per
//! namespace the ADD touches (the Node's, the Pod's), opened once and used for every
//! request of the ADD, instead of a thread, a runtime and a socket per request.
//!
//! The Pod's connection is opened on a short-lived thread that entered the Pod's
//! namespace (a netlink socket stays bound to the namespace it was created in); it is
//! then driven from the caller's thread like the Node's. The caller must be a plain OS
//! thread (never a tokio worker): the agent's handler threads are. The same thread opens
//! the Pod namespace's default `disable_ipv6` sysctl (see [`Ipv6Off`]).
use std::{fs::File, future::Future, io::ErrorKind, os::unix::fs::FileExt, path::Path};

use rtnetlink::Handle;
use tokio::{runtime::Runtime, task::JoinHandle};

use super::NetlinkError;
use crate::netns;

pub struct Session {
    rt: Runtime,
    node: Handle,
    pod: Option<Handle>,
    /// `net.ipv6.conf.default.disable_ipv6` of the Pod's namespace, opened inside it
    /// (a /proc/sys/net file stays bound to the namespace it was opened in); `None`
    /// when the kernel has no IPv6.
    pod_ipv6_default: Option<File>,
    connections: Vec<JoinHandle<()>>,
}

const IPV6_DEFAULT: &str = "/proc/sys/net/ipv6/conf/default/disable_ipv6";

/// The Pod namespace's default IPv6 switched off while a NIC is created there, so that
/// the NIC is born without IPv6 (the kernel copies the namespace's defaults into a new
/// interface). Writing an interface's own `disable_ipv6` instead takes RTNL by
/// `rtnl_trylock`, and the write is restarted from user space until it gets it: with a
/// hundred ADDs at once that spinning was a sixth of the Node's CPU. The default is an
/// RTNL-free write. The previous value is put back when this is dropped, so the Pod's
/// own later interfaces keep the kernel's default.
pub struct Ipv6Off<'a> {
    file: &'a File,
    restore: Option<u8>,
}

impl<'a> Ipv6Off<'a> {
    fn begin(file: &'a File) -> Result<Ipv6Off<'a>, NetlinkError> {
        let err = |source| NetlinkError::Sysctl {
            path: IPV6_DEFAULT.into(),
            source,
        };
        let mut old = [0u8; 1];
        file.read_at(&mut old, 0).map_err(err)?;
        if old[0] == b'1' {
            return Ok(Ipv6Off {
                file,
                restore: None,
            });
        }
        file.write_at(b"1", 0).map_err(err)?;
        Ok(Ipv6Off {
            file,
            restore: Some(old[0]),
        })
    }
}

impl Drop for Ipv6Off<'_> {
    fn drop(&mut self) {
        if let Some(old) = self.restore
            && let Err(error) = self.file.write_at(&[old], 0)
        {
            tracing::warn!(%error, "cannot restore the Pod namespace's default disable_ipv6");
        }
    }
}

fn open_ipv6_default() -> Result<Option<File>, NetlinkError> {
    match File::options().read(true).write(true).open(IPV6_DEFAULT) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(NetlinkError::Sysctl {
            path: IPV6_DEFAULT.into(),
            source,
        }),
    }
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
        let mut connections = vec![rt.spawn(conn)];
        let (pod, pod_ipv6_default) = match pod_ns {
            None => (None, None),
            Some(path) => {
                let h = rt.handle().clone();
                let ((pod, conn), ipv6) = netns::run_in(path, move || {
                    Ok::<_, NetlinkError>((connect(&h)?, open_ipv6_default()?))
                })??;
                connections.push(rt.spawn(conn));
                (Some(pod), ipv6)
            }
        };
        Ok(Session {
            rt,
            node,
            pod,
            pod_ipv6_default,
            connections,
        })
    }

    /// Switches the Pod namespace's default IPv6 off until the guard is dropped (a
    /// no-op guard without IPv6 or without a Pod namespace).
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

    /// Runs netlink work to completion on this session's runtime.
    pub fn block_on<T>(&self, work: impl Future<Output = T>) -> T {
        self.rt.block_on(work)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for c in &self.connections {
            c.abort();
        }
    }
}
