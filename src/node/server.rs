//! The daemon's CNI endpoint: a unix socket (0600, root only: SO_PEERCRED is checked
//! before anything is read), one request per connection, each handled on a thread of
//! its own (`node::workers`: reused, made only when none is idle). The listener and
//! the handler threads are started inside the Node's namespace, so every handler
//! thread (which inherits it) plumbs that Node.
//!
//! After its answer a request that changed something brings the datapath's view of the
//! cluster up to date (the new NIC's neighbour, the remote lists): the last request out
//! of a burst does it for all of them ([`InFlight`]).
use std::{
    io::Write,
    os::unix::net::{UnixListener, UnixStream},
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use super::{agent::Agent, workers::Workers};
use crate::cni::{CniError, Request, Response, code};

/// The requests being served, and whether one that finished meanwhile still owes the
/// sync after its answer. A hundred ADDs at once each ran (or waited for) a sync that
/// read and compared the whole cluster, on the CPU the others needed; the last one out
/// now runs one that covers them all (it starts after every write they made). A Node
/// never goes without: the daemon's own loop syncs on every change of the cluster too.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    owed: AtomicBool,
}

impl InFlight {
    /// A request comes in; it is counted out when the guard is dropped, also when its
    /// handler panics (so that the count comes back to 0 and a later request is last).
    fn enter(&self) -> Entered<'_> {
        self.count.fetch_add(1, Ordering::SeqCst);
        Entered {
            in_flight: self,
            left: false,
        }
    }

    /// A sync that was due failed: the next request out runs one again.
    fn owe(&self) {
        self.owed.store(true, Ordering::SeqCst);
    }
}

/// One request being served ([`InFlight::enter`]).
struct Entered<'a> {
    in_flight: &'a InFlight,
    left: bool,
}

impl Entered<'_> {
    /// True when this request is the last one out and a sync is owed (by it or by one
    /// that left before it): the caller runs it.
    fn leave(mut self, changed: bool) -> bool {
        let f = self.in_flight;
        self.left = true;
        if changed {
            f.owed.store(true, Ordering::SeqCst);
        }
        f.count.fetch_sub(1, Ordering::SeqCst) == 1 && f.owed.swap(false, Ordering::SeqCst)
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if !self.left {
            self.in_flight.count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn serve(agent: &Agent, in_flight: &InFlight, conn: UnixStream) {
    let entered = in_flight.enter();
    let response = match crate::unixsock::check_peer(&conn) {
        Err(refusal) => {
            tracing::warn!(refusal, "CNI socket: caller refused");
            crate::unixsock::refuse(&conn);
            Response::Error(CniError::new(code::INVALID_ENV, refusal))
        }
        Ok(()) => match crate::unixsock::read_request(&conn) {
            Ok(line) => match serde_json::from_str::<Request>(&line) {
                Ok(req) => match agent.handle(&req) {
                    Ok(r) => Response::Ok(r),
                    Err(e) => Response::Error(e),
                },
                Err(e) => Response::Error(
                    CniError::new(code::DECODE_FAILURE, "unreadable request")
                        .details(e.to_string()),
                ),
            },
            Err(e) => Response::Error(
                CniError::new(code::IO_FAILURE, "cannot read the request").details(e.to_string()),
            ),
        },
    };
    let mut out = serde_json::to_vec(&response).expect("responses serialize");
    out.push(b'\n');
    if let Err(e) = (&conn).write_all(&out) {
        tracing::debug!(error = %e, "CNI caller went away before its answer");
    }
    if entered.leave(matches!(response, Response::Ok(_)))
        && let Err(e) = agent.sync_from_cluster()
    {
        in_flight.owe();
        tracing::warn!(error = %e, "remote lists and router not synced after a CNI request");
    }
}

/// Binds `socket` (0600 whatever the umask) and serves until the process ends. Call
/// from a thread inside the Node's namespace.
pub fn listen(agent: Arc<Agent>, socket: &Path) -> std::io::Result<std::thread::JoinHandle<()>> {
    let handlers = Workers::new("juneau-cni-req", WARM_HANDLERS).map_err(std::io::Error::other)?;
    agent
        .warm_endpoint_writers(WARM_HANDLERS)
        .map_err(std::io::Error::other)?;
    let listener = crate::unixsock::bind_private(socket)?;
    Ok(spawn_accept(agent, listener, socket.to_owned(), handlers))
}

/// Handler threads made when the socket opens: a kubelet starting many Pods at once
/// (a Node coming back) finds them waiting.
const WARM_HANDLERS: usize = 16;

fn spawn_accept(
    agent: Arc<Agent>,
    listener: UnixListener,
    path: PathBuf,
    handlers: Workers,
) -> std::thread::JoinHandle<()> {
    let in_flight = Arc::new(InFlight::default());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            match conn {
                Ok(conn) => {
                    let (agent, in_flight) = (agent.clone(), in_flight.clone());
                    if let Err(e) = handlers.run(move || serve(&agent, &in_flight, conn)) {
                        tracing::error!(error = %e, "CNI socket: request not served");
                    }
                }
                Err(e) => tracing::warn!(socket = %path.display(), error = %e, "accept failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::InFlight;

    #[test]
    fn mx_01_overlapping_requests_owe_one_sync_run_by_the_last_one_out() {
        let f = InFlight::default();
        let (a, b, c) = (f.enter(), f.enter(), f.enter());
        // The first two leave while another is in flight: no sync yet, one owed.
        assert!(!a.leave(true));
        assert!(!b.leave(false));
        // The last one out runs it, whether or not it changed anything itself.
        assert!(c.leave(false));
        // Served alone, a request that changed something syncs; one that did not (a
        // failure) owes nothing.
        assert!(f.enter().leave(true));
        assert!(!f.enter().leave(false));
        // A handler that panicked is counted out all the same: the next one is last.
        let (a, b) = (f.enter(), f.enter());
        drop(a);
        assert!(b.leave(true));
        // A failed sync is owed to the next request out.
        f.owe();
        assert!(f.enter().leave(false));
    }
}
