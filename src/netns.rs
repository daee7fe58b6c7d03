//! Running code inside a network namespace without moving the caller.
//!
//! `setns(CLONE_NEWNET)` changes the namespace of the calling *thread* only, so work for
//! another namespace runs on a fresh OS thread that enters it and then ends: never on a
//! tokio worker, never on the caller's thread. Sockets opened there stay bound to that
//! namespace after the thread is gone (netavark does the same).
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
