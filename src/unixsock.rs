//! Local control sockets (the daemon's CNI socket, the standalone store): created
//! 0600 whatever the umask, and a peer is served only when the kernel says it runs as
//! root or as this process's own user (SO_PEERCRED), as Cilium's and containerd's
//! sockets are.
use std::{
    os::unix::{
        fs::PermissionsExt,
        net::{UnixListener, UnixStream},
    },
    path::Path,
};

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

/// Binds `path` (replacing a stale socket file) so that only its owner can connect:
/// the folder is made 0700 when this call creates it, the socket 0600 before anyone
/// can reach it (it is bound inside a private folder, then moved into place).
pub fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    // Bind in a private folder beside the target, so the socket is never reachable with
    // the umask's mode.
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staging = dir.join(format!(".bind-{}-{seq}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o700))?;
    let tmp = staging.join("s");
    let bound = (|| {
        let listener = UnixListener::bind(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::rename(&tmp, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    bound
}

/// Reads one request line of at most 16 MiB, waiting at most 30 s for it.
pub fn read_request(conn: &UnixStream) -> std::io::Result<String> {
    read_line_within(conn, std::time::Duration::from_secs(30))
}

fn read_line_within(conn: &UnixStream, wait: std::time::Duration) -> std::io::Result<String> {
    use std::io::{BufRead, Read};
    conn.set_read_timeout(Some(wait))?;
    let mut line = String::new();
    std::io::BufReader::new(conn.take(16 << 20)).read_line(&mut line)?;
    Ok(line)
}

/// Refuses a caller: its request is read first (and dropped unparsed), so that the
/// caller is never cut off mid-write and always gets the answer that says why.
pub fn refuse(conn: &UnixStream) {
    if let Err(e) = read_line_within(conn, std::time::Duration::from_secs(2)) {
        tracing::debug!(error = %e, "refused caller's request not read");
    }
}

/// Ok when the peer runs as root or as our own user; else a message saying who it is.
pub fn check_peer(conn: &UnixStream) -> Result<(), String> {
    let cred = getsockopt(conn, PeerCredentials)
        .map_err(|e| format!("cannot read the caller's credentials (SO_PEERCRED): {e}"))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if cred.uid() == 0 || cred.uid() == me {
        Ok(())
    } else {
        Err(format!(
            "permission denied: the caller (uid {}, pid {}) is not root; only root may use this socket",
            cred.uid(),
            cred.pid()
        ))
    }
}
