//! The daemon's CNI endpoint: a unix socket (0600, root only: SO_PEERCRED is checked
//! before anything is read), one request per connection, each handled on a thread of
//! its own (`node::workers`: reused, made only when none is idle). The listener and
//! the handler threads are started inside the Node's namespace, so every handler
//! thread (which inherits it) plumbs that Node.
use std::{
    io::Write,
    os::unix::net::{UnixListener, UnixStream},
    path::{Path, PathBuf},
    sync::Arc,
};

use super::{agent::Agent, workers::Workers};
use crate::cni::{CniError, Request, Response, code};

fn serve(agent: &Agent, conn: UnixStream) {
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
    if matches!(response, Response::Ok(_))
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
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            match conn {
                Ok(conn) => {
                    let agent = agent.clone();
                    if let Err(e) = handlers.run(move || serve(&agent, conn)) {
                        tracing::error!(error = %e, "CNI socket: request not served");
                    }
                }
                Err(e) => tracing::warn!(socket = %path.display(), error = %e, "accept failed"),
            }
        }
    })
}
