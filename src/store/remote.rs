//! The embedded store over a local socket: the standalone run serves its [`Store`] to
//! its `juneau node` processes, which read it through [`RemoteStore`] (a
//! [`Cluster`]) as daemons in a cluster read the API server. One JSON request and one
//! JSON answer per connection; a `wait` is held open by the server like a watch.
use std::{
    io::{BufRead, BufReader, Write},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};

use super::Store;
use crate::{
    api::{NetworkEndpoint, bgpnodestate::BGPNodeStateStatus, condition::Condition},
    cluster::{Cluster, ClusterError, Desired, World},
};

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Request {
    Read,
    Wait {
        seen: u64,
        timeout_ms: u64,
    },
    PutEndpoint {
        endpoint: Box<NetworkEndpoint>,
    },
    DeleteEndpoint {
        namespace: String,
        name: String,
    },
    Apply {
        desired: Box<Desired>,
    },
    SetAttachmentCondition {
        name: String,
        condition: Condition,
    },
    SetBgpNodeState {
        node: String,
        status: Box<BGPNodeStateStatus>,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    World { world: Box<World>, generation: u64 },
    Generation { generation: u64 },
    Changed { changed: bool },
    Done,
    Error { message: String },
}

/// A [`Cluster`] read from a standalone run's store socket.
#[derive(Clone, Debug)]
pub struct RemoteStore {
    socket: PathBuf,
}

impl RemoteStore {
    pub fn new(socket: &Path) -> Self {
        Self {
            socket: socket.to_owned(),
        }
    }

    fn call(&self, req: &Request, timeout: Duration) -> Result<Answer, ClusterError> {
        let unreachable = |cause: String| ClusterError::Unreachable {
            at: self.socket.display().to_string(),
            cause,
        };
        let mut conn = UnixStream::connect(&self.socket).map_err(|e| unreachable(e.to_string()))?;
        conn.set_read_timeout(Some(timeout + Duration::from_secs(5)))
            .map_err(|e| unreachable(e.to_string()))?;
        let mut line = serde_json::to_vec(req).expect("requests serialize");
        line.push(b'\n');
        conn.write_all(&line)
            .map_err(|e| unreachable(e.to_string()))?;
        let mut answer = String::new();
        BufReader::new(&conn)
            .read_line(&mut answer)
            .map_err(|e| unreachable(e.to_string()))?;
        match serde_json::from_str(&answer) {
            Ok(Answer::Error { message }) => Err(ClusterError::Refused(message)),
            Ok(a) => Ok(a),
            Err(e) => Err(unreachable(format!("unreadable answer: {e}"))),
        }
    }

    fn unexpected(a: Answer) -> ClusterError {
        ClusterError::Refused(format!("unexpected answer {a:?}"))
    }
}

const QUICK: Duration = Duration::from_secs(10);

impl Cluster for RemoteStore {
    fn read(&self) -> Result<(World, u64), ClusterError> {
        match self.call(&Request::Read, QUICK)? {
            Answer::World { world, generation } => Ok((*world, generation)),
            a => Err(Self::unexpected(a)),
        }
    }

    fn wait(&self, seen: u64, timeout: Duration) -> Result<u64, ClusterError> {
        let req = Request::Wait {
            seen,
            timeout_ms: timeout.as_millis() as u64,
        };
        match self.call(&req, timeout)? {
            Answer::Generation { generation } => Ok(generation),
            a => Err(Self::unexpected(a)),
        }
    }

    fn put_endpoint(&self, endpoint: NetworkEndpoint) -> Result<(), ClusterError> {
        let req = Request::PutEndpoint {
            endpoint: Box::new(endpoint),
        };
        match self.call(&req, QUICK)? {
            Answer::Done => Ok(()),
            a => Err(Self::unexpected(a)),
        }
    }

    fn delete_endpoint(&self, namespace: &str, name: &str) -> Result<(), ClusterError> {
        let req = Request::DeleteEndpoint {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        match self.call(&req, QUICK)? {
            Answer::Done => Ok(()),
            a => Err(Self::unexpected(a)),
        }
    }

    fn apply(&self, desired: &Desired) -> Result<bool, ClusterError> {
        let req = Request::Apply {
            desired: Box::new(desired.clone()),
        };
        match self.call(&req, QUICK)? {
            Answer::Changed { changed } => Ok(changed),
            a => Err(Self::unexpected(a)),
        }
    }

    fn set_attachment_condition(
        &self,
        name: &str,
        condition: Condition,
    ) -> Result<bool, ClusterError> {
        let req = Request::SetAttachmentCondition {
            name: name.to_owned(),
            condition,
        };
        match self.call(&req, QUICK)? {
            Answer::Changed { changed } => Ok(changed),
            a => Err(Self::unexpected(a)),
        }
    }

    fn set_bgp_node_state(
        &self,
        node: &str,
        status: BGPNodeStateStatus,
    ) -> Result<bool, ClusterError> {
        let req = Request::SetBgpNodeState {
            node: node.to_owned(),
            status: Box::new(status),
        };
        match self.call(&req, QUICK)? {
            Answer::Changed { changed } => Ok(changed),
            a => Err(Self::unexpected(a)),
        }
    }
}

fn changed(r: Result<bool, ClusterError>) -> Answer {
    match r {
        Ok(changed) => Answer::Changed { changed },
        Err(e) => Answer::Error {
            message: e.to_string(),
        },
    }
}

fn answer(store: &Store, req: Request) -> Answer {
    match req {
        Request::Read => {
            let (world, generation) = store.read();
            Answer::World {
                world: Box::new(world),
                generation,
            }
        }
        Request::Wait { seen, timeout_ms } => Answer::Generation {
            generation: store.wait(seen, Duration::from_millis(timeout_ms.min(60_000))),
        },
        Request::PutEndpoint { endpoint } => {
            store.put_endpoint(*endpoint);
            Answer::Done
        }
        Request::DeleteEndpoint { namespace, name } => {
            store.delete_endpoint(&namespace, &name);
            Answer::Done
        }
        Request::Apply { desired } => match Cluster::apply(store, &desired) {
            Ok(changed) => Answer::Changed { changed },
            Err(e) => Answer::Error {
                message: e.to_string(),
            },
        },
        Request::SetAttachmentCondition { name, condition } => {
            changed(Cluster::set_attachment_condition(store, &name, condition))
        }
        Request::SetBgpNodeState { node, status } => {
            changed(Cluster::set_bgp_node_state(store, &node, *status))
        }
    }
}

fn serve_one(store: &Store, conn: UnixStream) {
    let answer = match crate::unixsock::check_peer(&conn) {
        Err(message) => {
            crate::unixsock::refuse(&conn);
            Answer::Error { message }
        }
        Ok(()) => match crate::unixsock::read_request(&conn) {
            Ok(line) => match serde_json::from_str::<Request>(&line) {
                Ok(req) => answer(store, req),
                Err(e) => Answer::Error {
                    message: format!("unreadable request: {e}"),
                },
            },
            Err(e) => Answer::Error {
                message: format!("cannot read the request: {e}"),
            },
        },
    };
    let mut out = serde_json::to_vec(&answer).expect("answers serialize");
    out.push(b'\n');
    if let Err(e) = (&conn).write_all(&out) {
        tracing::debug!(error = %e, "store client went away before its answer");
    }
}

/// Serves `store` on `socket` (0600, root only) from a thread per connection until the
/// process ends.
pub fn serve(store: Store, socket: &Path) -> std::io::Result<std::thread::JoinHandle<()>> {
    let listener = crate::unixsock::bind_private(socket)?;
    Ok(std::thread::spawn(move || {
        for conn in listener.incoming() {
            match conn {
                Ok(conn) => {
                    let store = store.clone();
                    std::thread::spawn(move || serve_one(&store, conn));
                }
                Err(e) => tracing::warn!(error = %e, "store socket accept failed"),
            }
        }
    }))
}
