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
    fn enter(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// True when this request is the last one out and a sync is owed (by it or by one
    /// that left before it): the caller runs it.
    fn leave(&self, changed: bool) -> bool {
        if changed {
            self.owed.store(true, Ordering::SeqCst);
        }
        self.count.fetch_sub(1, Ordering::SeqCst) == 1 && self.owed.swap(false, Ordering::SeqCst)
    }
}

fn serve(agent: &Agent, in_flight: &InFlight, conn: UnixStream) {
    in_flight.enter();
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
    if in_flight.leave(matches!(response, Response::Ok(_)))
        && let Err(e) = agent.sync_from_cluster()
    {
        tracing::warn!(error = %e, "remote lists and router not synced after a CNI request");
    }
}

/// Binds `socket` (0600 whatever the umask) and serves until the process ends. Call
/// from a thread inside the Node's namespace.
pub fn listen(agent: Arc<Agent>, socket: &Path) -> std::io::Result<std::thread::JoinHandle<()>> {
    let handlers = Workers::new("juneau-cni-req", WARM_HANDLERS).map_err(std::io::Error::other)?;
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
        f.enter();
        f.enter();
        f.enter();
        // The first two leave while another is in flight: no sync yet, one owed.
        assert!(!f.leave(true));
        assert!(!f.leave(false));
        // The last one out runs it, whether or not it changed anything itself.
        assert!(f.leave(false));
        // Served alone, a request that changed something syncs; one that did not (a
        // failure) owes nothing.
        f.enter();
        assert!(f.leave(true));
        f.enter();
        assert!(!f.leave(false));
    }
}
