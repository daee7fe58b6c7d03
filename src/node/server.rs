//! The daemon's CNI endpoint: a unix socket, one request per connection, each handled
//! on its own thread. The listener thread is started inside the Node's namespace, so
//! every handler thread (which inherits it) plumbs that Node.
use std::{
    io::{BufRead, BufReader, Write},
    os::unix::net::{UnixListener, UnixStream},
    path::{Path, PathBuf},
    sync::Arc,
};

use super::agent::Agent;
use crate::cni::{CniError, Request, Response, code};

fn serve(agent: &Agent, conn: UnixStream) {
    let mut line = String::new();
    let mut reader = BufReader::new(&conn);
    let response = match reader.read_line(&mut line) {
        Ok(_) => match serde_json::from_str::<Request>(&line) {
            Ok(req) => match agent.handle(&req) {
                Ok(r) => Response::Ok(r),
                Err(e) => Response::Error(e),
            },
            Err(e) => Response::Error(
                CniError::new(code::DECODE_FAILURE, "unreadable request").details(e.to_string()),
            ),
        },
        Err(e) => Response::Error(
            CniError::new(code::IO_FAILURE, "cannot read the request").details(e.to_string()),
        ),
    };
    let mut out = serde_json::to_vec(&response).expect("responses serialize");
    out.push(b'\n');
    let _ = (&conn).write_all(&out);
    if matches!(response, Response::Ok(_)) {
        agent.sync_remotes();
    }
}

/// Binds `socket` and serves until the process ends. Call from a thread inside the
/// Node's namespace.
pub fn listen(agent: Arc<Agent>, socket: &Path) -> std::io::Result<std::thread::JoinHandle<()>> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    let path: PathBuf = socket.to_owned();
    Ok(std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let agent = agent.clone();
            std::thread::spawn(move || serve(&agent, conn));
        }
        let _ = std::fs::remove_file(path);
    }))
}
