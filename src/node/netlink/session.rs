//! One CNI ADD's netlink: a current-thread runtime and one rtnetlink connection per
//! namespace the ADD touches (the Node's, the Pod's), opened once and used for every
//! request of the ADD, instead of a thread, a runtime and a socket per request.
//!
//! The Pod's connection is opened while the caller's thread visits the Pod's namespace
//! ([`netns::visit`]: a netlink socket stays bound to the namespace it was created in);
//! it is then driven like the Node's. The caller must be a plain OS thread (never a
//! tokio worker): the agent's handler threads are. The same visit opens the Pod
//! namespace's default `disable_ipv6` sysctl ([`Ipv6Off`]).
use std::{fs::File, future::Future, path::Path};

use rtnetlink::Handle;
use tokio::{runtime::Runtime, task::JoinHandle};

use super::{NetlinkError, ipv6_off::Ipv6Off};
use crate::netns;

pub struct Session {
    rt: Runtime,
    node: Handle,
    pod: Option<Handle>,
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
        let mut connections = vec![rt.spawn(conn)];
        let (pod, pod_ipv6_default) = match pod_ns {
            None => (None, None),
            Some(path) => {
                let h = rt.handle();
                let ((pod, conn), ipv6) = netns::visit(path, || {
                    Ok::<_, NetlinkError>((connect(h)?, Ipv6Off::open()?))
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
