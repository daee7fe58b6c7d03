//! The daemon's side of `--enable-probe-rewrite` (L2-27): the kubelet's rewritten
//! probes (`admission::probes`) arrive as `GET /juneau/probe/<ns>/<token>/<container>/
//! <kind>` on the Node's loopback, and the daemon runs the original inside the Pod's
//! network namespace, against the Pod's own eth0 address, where no route from the
//! Node is needed (the Pod's Vpc may reuse the Node's ranges).
//!
//! Not an open proxy: loopback only; only Pods of this Node, found by namespace and the
//! token their annotation holds; only the probes stored there; only the Pod's own
//! address, dialled from inside its namespace; the answer is a status code with no
//! body. What the kubelet sees: the application's status (a 3xx as 200, since the
//! kubelet counts it a success and must not follow it here), 502 when the connection
//! is refused, 504 when it times out, 503 when the Pod, its port or its namespace is
//! not found here; the cause is logged.
use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use super::{agent::Agent, workers::Workers};
use crate::admission::probes::{Check, Original, PROBE_PATH, Stored};

/// Why a probe could not be run, and the status the kubelet gets for it.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("not a probe path: {0}")]
    Path(String),
    #[error("no Pod of this Node in {namespace} holds probe token {token}")]
    NoPod { namespace: String, token: String },
    #[error("Pod {0} has no stored probe {1}")]
    NoProbe(String, String),
    #[error("Pod {0}: {1}")]
    NotHere(String, String),
    #[error("connection to {0} refused: {1}")]
    Refused(SocketAddr, std::io::Error),
    #[error("{0} did not answer in time")]
    Timeout(SocketAddr),
    #[error("{0}: {1}")]
    Io(SocketAddr, std::io::Error),
}

impl ProbeError {
    fn status(&self) -> u16 {
        match self {
            ProbeError::Path(_) => 404,
            ProbeError::NoPod { .. } | ProbeError::NoProbe(..) | ProbeError::NotHere(..) => 503,
            ProbeError::Refused(..) | ProbeError::Io(..) => 502,
            ProbeError::Timeout(_) => 504,
        }
    }
}

/// `<ns>/<token>/<container>/<kind>` of a probe path.
fn parse(path: &str) -> Result<(&str, &str, String), ProbeError> {
    let rest = path
        .strip_prefix(PROBE_PATH)
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(|| ProbeError::Path(path.to_owned()))?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [ns, token, container, kind]
            if [ns, token, container, kind].iter().all(|p| !p.is_empty()) =>
        {
            Ok((ns, token, format!("{container}/{kind}")))
        }
        _ => Err(ProbeError::Path(path.to_owned())),
    }
}

/// Where a probe goes: the Pod's namespace file, its eth0 address, the original.
struct Target {
    pod: String,
    netns: PathBuf,
    address: Ipv4Addr,
    original: Original,
}

/// Finds the Pod of this Node by namespace and token, its stored probe, its eth0
/// port (the host veth's alias names its container) and that container's namespace.
fn target(agent: &Agent, records: &Path, path: &str) -> Result<Target, ProbeError> {
    let (ns, token, key) = parse(path)?;
    let not_here = |pod: &str, why: String| ProbeError::NotHere(format!("{ns}/{pod}"), why);
    let (world, _) = agent
        .cluster
        .read()
        .map_err(|e| not_here("?", format!("cannot read the cluster: {e}")))?;
    let (pod, stored) = world
        .pods
        .iter()
        .filter(|p| p.namespace == ns && p.node == agent.node)
        .find_map(|p| {
            let s = Stored::of(&p.annotations)?;
            (s.token == token).then(|| (p.name.clone(), s))
        })
        .ok_or_else(|| ProbeError::NoPod {
            namespace: ns.to_owned(),
            token: token.to_owned(),
        })?;
    let original = stored
        .probes
        .get(&key)
        .cloned()
        .ok_or_else(|| ProbeError::NoProbe(format!("{ns}/{pod}"), key.clone()))?;
    let address = world
        .objects
        .interfaces
        .iter()
        .find(|n| {
            n.metadata.namespace.as_deref() == Some(ns)
                && n.spec.pod_ref.name == pod
                && n.spec.interface == "eth0"
        })
        .and_then(|n| n.status.as_ref()?.address)
        .ok_or_else(|| not_here(&pod, "its eth0 has no address".into()))?
        .addr();
    let container = super::veth::ports(super::veth::OWNER_ALIAS)
        .map_err(|e| not_here(&pod, format!("cannot list the Node's links: {e}")))?
        .into_iter()
        .map(|(_, _, alias)| alias)
        .find(|a| a.namespace == ns && a.pod == pod && a.interface == "eth0")
        .ok_or_else(|| not_here(&pod, "its eth0 has no port on this Node".into()))?
        .container_id;
    let netns = netns_record(records, &container).ok_or_else(|| {
        not_here(
            &pod,
            format!("no namespace recorded for container {container}"),
        )
    })?;
    Ok(Target {
        pod: format!("{ns}/{pod}"),
        netns,
        address,
        original,
    })
}

/// The namespace file a container's ADD named (`record_netns`).
fn netns_record(records: &Path, container: &str) -> Option<PathBuf> {
    std::fs::read_to_string(records.join(container))
        .ok()
        .map(|p| PathBuf::from(p.trim()))
}

/// Records the namespace of `container` (at its ADD), so that a restarted daemon finds it.
pub fn record_netns(records: &Path, container: &str, netns: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(records)?;
    let tmp = records.join(format!(".{container}"));
    std::fs::write(&tmp, netns.as_os_str().as_encoded_bytes())?;
    std::fs::rename(tmp, records.join(container))
}

/// Forgets `container`'s namespace (at its DEL or GC); nothing to forget is fine.
pub fn forget_netns(records: &Path, container: &str) {
    match std::fs::remove_file(records.join(container)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(container, error = %e, "cannot remove a probe namespace record"),
    }
}

/// Runs the original probe from inside the Pod's namespace; the status for the kubelet.
fn run(t: &Target) -> Result<u16, ProbeError> {
    // Under the kubelet's own timeout, which covers its call to us too.
    let budget = Duration::from_millis(u64::from(t.original.timeout_seconds.max(1)) * 1000 - 100);
    let port = match &t.original.check {
        Check::Http { port, .. } | Check::Tcp { port } => *port,
    };
    let to = SocketAddr::from((t.address, port));
    // A socket belongs to the namespace it was made in: made on a thread inside the
    // Pod's, it is then used from this one.
    let stream = crate::netns::run_in(&t.netns, || TcpStream::connect_timeout(&to, budget))
        .map_err(|e| ProbeError::NotHere(t.pod.clone(), e.to_string()))?
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::TimedOut => ProbeError::Timeout(to),
            _ => ProbeError::Refused(to, e),
        })?;
    let Check::Http { path, headers, .. } = &t.original.check else {
        return Ok(200);
    };
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => ProbeError::Timeout(to),
        _ => ProbeError::Io(to, e),
    };
    stream.set_read_timeout(Some(budget)).map_err(io)?;
    stream.set_write_timeout(Some(budget)).map_err(io)?;
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {to}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("user-agent"))
    {
        request.push_str("User-Agent: kube-probe (juneau)\r\n");
    }
    request.push_str("Accept: */*\r\nConnection: close\r\n\r\n");
    (&stream).write_all(request.as_bytes()).map_err(io)?;
    let mut status = String::new();
    BufReader::new(&stream)
        .take(4096)
        .read_line(&mut status)
        .map_err(io)?;
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|_| status.starts_with("HTTP/"))
        .ok_or_else(|| {
            ProbeError::Io(
                to,
                std::io::Error::other(format!("not an HTTP answer: {:?}", status.trim_end())),
            )
        })?;
    Ok(if (300..400).contains(&code) {
        200
    } else {
        code
    })
}

/// Serves one kubelet connection: one request, one status, no body.
fn serve(agent: &Agent, records: &Path, conn: TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    let mut reader = BufReader::new(&conn).take(8192);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    // The rest of the head (the kubelet's headers): read and left.
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        header.clear();
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let status = match target(agent, records, &path).and_then(|t| run(&t)) {
        Ok(code) => code,
        Err(e) => {
            tracing::info!(path, error = %e, status = e.status(), "probe failed");
            e.status()
        }
    };
    let answer = format!("HTTP/1.1 {status} -\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    if let Err(e) = (&conn).write_all(answer.as_bytes()) {
        tracing::debug!(error = %e, "the kubelet left before its probe's answer");
    }
}

/// Binds the probe listener (before the daemon touches anything: a taken port fails
/// the start). Loopback only: nothing off the Node may ask.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::other(format!(
            "the probe listener {addr} must be a loopback address: it runs probes inside Pods"
        )));
    }
    TcpListener::bind(addr)
}

/// Serves rewritten probes on `listener` from threads of their own (each probe dials
/// and waits: never on a tokio worker, and a namespace is entered on a thread made
/// for it). `records` is where ADDs record their namespaces.
pub fn serve_on(agent: Arc<Agent>, listener: TcpListener, records: PathBuf) -> std::io::Result<()> {
    let workers = Workers::new("juneau-probe", 2).map_err(std::io::Error::other)?;
    let records = Arc::new(records);
    std::thread::Builder::new()
        .name("juneau-probes".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(conn) => {
                        let (agent, records) = (agent.clone(), records.clone());
                        if let Err(e) = workers.run(move || serve(&agent, &records, conn)) {
                            tracing::error!(error = %e, "probe not served");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "probe accept failed"),
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_27_a_probe_path_names_namespace_token_container_and_kind_and_nothing_else() {
        let (ns, token, key) = parse("/juneau/probe/ns1/tok/web/readiness").unwrap();
        assert_eq!((ns, token, key.as_str()), ("ns1", "tok", "web/readiness"));
        for bad in [
            "/juneau/probe/ns1/tok/web",
            "/juneau/probe/ns1/tok/web/readiness/x",
            "/juneau/probe/ns1//web/readiness",
            "/metrics",
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.status(), 404, "{bad}");
        }
    }

    #[test]
    fn l2_27_a_container_s_namespace_record_survives_and_goes_with_it() {
        let dir = std::env::temp_dir().join(format!("juneau-probe-rec-{}", std::process::id()));
        record_netns(&dir, "c1", Path::new("/var/run/netns/cni-1")).unwrap();
        assert_eq!(
            netns_record(&dir, "c1").as_deref(),
            Some(Path::new("/var/run/netns/cni-1"))
        );
        forget_netns(&dir, "c1");
        forget_netns(&dir, "c1");
        assert_eq!(netns_record(&dir, "c1"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
