//! Running code inside a network namespace without moving the caller.
//!
//! `setns(CLONE_NEWNET)` changes the namespace of the calling *thread* only, so work for
//! another namespace runs on a fresh OS thread that enters it and then ends
//! ([`run_in`]): never on a tokio worker. Sockets opened there stay bound to that
//! namespace after the thread is gone (netavark does the same). A plain OS thread that
//! owns its work (a CNI handler) may instead step in and back out ([`visit`]): a thread
//! made and ended per request is what a hundred concurrent ADDs spent most in.
use std::{
    fs::File,
    os::fd::AsFd,
    path::{Path, PathBuf},
};

use nix::sched::{CloneFlags, setns};

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("cannot open network namespace {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot enter network namespace {path}: {source}")]
    Enter { path: PathBuf, source: nix::Error },
    #[error("the thread working in network namespace {0} panicked")]
    Panicked(PathBuf),
    #[error("cannot read this thread's own network namespace: {0}")]
    Own(std::io::Error),
}

/// The bind-mount path of a named namespace (`ip netns add NAME`).
pub fn named(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

/// Run `f` on a new thread inside the namespace at `path` and return its result. `f`
/// may borrow from the caller (scoped thread).
pub fn run_in<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
    let ns = File::open(path).map_err(|source| NetnsError::Open {
        path: path.to_owned(),
        source,
    })?;
    std::thread::scope(|s| {
        s.spawn(|| {
            setns(ns.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Enter {
                path: path.to_owned(),
                source,
            })?;
            Ok(f())
        })
        .join()
        .map_err(|_| NetnsError::Panicked(path.to_owned()))?
    })
}

/// Runs `f` inside the namespace at `path` on the calling thread, which then goes back
/// to the namespace it was in. For plain OS threads only (never a tokio worker, whose
/// other tasks would run in the wrong namespace meanwhile). A thread that cannot go
/// back panics: it must not go on working in another namespace.
pub fn visit<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, NetnsError> {
    let target = File::open(path).map_err(|source| NetnsError::Open {
        path: path.to_owned(),
        source,
    })?;
    let home = File::open("/proc/thread-self/ns/net").map_err(NetnsError::Own)?;
    setns(target.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Enter {
        path: path.to_owned(),
        source,
    })?;
    // Back home also when `f` panics: the thread may be caught and reused.
    struct Home(File);
    impl Drop for Home {
        fn drop(&mut self) {
            if let Err(e) = setns(self.0.as_fd(), CloneFlags::CLONE_NEWNET) {
                panic!("cannot return to this thread's network namespace: {e}");
            }
        }
    }
    let _home = Home(home);
    Ok(f())
}

/// A named network namespace this process created (`ip netns add`), deleted by name
/// when dropped. It gets its own `/etc/netns/<name>/resolv.conf`, which `ip netns exec`
/// mounts over /etc/resolv.conf, so a program run inside can never rewrite the
/// machine's resolver configuration.
pub struct Owned {
    name: String,
    path: PathBuf,
}

impl Owned {
    pub fn create(name: &str) -> std::io::Result<Owned> {
        let etc = Path::new("/etc/netns").join(name);
        std::fs::create_dir_all(&etc)?;
        std::fs::write(etc.join("resolv.conf"), "")?;
        let out = std::process::Command::new("ip")
            .args(["netns", "add", name])
            .output()?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&etc);
            return Err(std::io::Error::other(format!(
                "ip netns add {name}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let ns = Owned {
            name: name.to_owned(),
            path: named(name),
        };
        // No interface made inside speaks IPv6 on its own unless asked to.
        for key in ["default", "all"] {
            if let Err(e) = ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
            ]) {
                tracing::warn!(ns = name, key, error = %e, "cannot turn IPv6 off in a new namespace");
            }
        }
        if let Err(e) = ns.exec(&["ip", "link", "set", "lo", "up"]) {
            tracing::warn!(ns = name, error = %e, "cannot bring lo up in a new namespace");
        }
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs a program inside; its stdout, or its stderr as the error.
    pub fn exec(&self, argv: &[&str]) -> Result<String, String> {
        exec_in(&self.name, argv)
    }
}

/// Runs a program inside the named namespace (`ip netns exec`); its stdout, or its
/// stderr as the error.
pub fn exec_in(name: &str, argv: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", name])
        .args(argv)
        .output()
        .map_err(|e| format!("{argv:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{argv:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // By name only: never anything this process did not create.
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(&self.name));
    }
}
