//! The processes a part of Juneau keeps running beside itself, kept as a kubelet keeps a
//! Pod's containers: one that exits is started again after a doubling delay (as the
//! kubelet's CrashLoopBackOff, 100 ms up to 5 s, back to 100 ms after 10 s of life),
//! and every start and exit is an event.
//!
//! The standalone run keeps one `juneau node` per Node namespace here; a Node feature
//! that needs a process of its own (the BGP speaker) gets it through
//! [`crate::node::feature::NodeFeature::start`]. One watcher thread spawns every
//! process, so a process [`ProcessSpec::tied`] to its supervisor gets the stop signal
//! when the supervisor's process dies, SIGKILL included (`child::die_with_parent`);
//! an untied one (a speaker that must outlive a daemon restart) lives on.
use std::{
    collections::BTreeMap,
    fs::File,
    os::{fd::AsRawFd, unix::process::CommandExt},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("no process named {0:?} is supervised; add its spec first")]
    Unknown(String),
    #[error("{what}: cannot start it: {cause}")]
    Start { what: String, cause: String },
    #[error("{what}: it did not come up within {timeout:?}; last log lines: {tail}")]
    NotReady {
        what: String,
        timeout: Duration,
        tail: String,
    },
}

/// When a started process counts as up.
#[derive(Clone, Debug)]
pub enum Ready {
    /// As soon as it is spawned.
    Spawned,
    /// When this file holds its pid (a daemon writes it once it serves).
    PidFile(PathBuf),
}

/// How one supervised process is started and stopped.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// Its key among the supervisor's processes.
    pub name: String,
    /// How the events name it ("node n1: daemon").
    pub what: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The network namespace it runs in (`/run/netns/<name>`); `None`: the
    /// supervisor's own.
    pub netns: Option<PathBuf>,
    /// Its stdout and stderr, appended.
    pub log: PathBuf,
    pub ready: Ready,
    /// Sent by [`Supervisor::stop`] (and on the supervisor's death when tied).
    pub stop_signal: i32,
    /// Dies with the supervisor's process.
    pub tied: bool,
}

#[derive(Default)]
struct Slot {
    child: Option<Child>,
    /// When the current child started, and the earliest the next may start.
    started_at: Option<Instant>,
    not_before: Option<Instant>,
    backoff: Duration,
    /// Keep it running (start it again when it exits).
    wanted: bool,
    starts: u32,
    last_error: Option<String>,
}

struct Entry {
    spec: ProcessSpec,
    slot: Slot,
}

pub struct Supervisor {
    entries: Mutex<BTreeMap<String, Entry>>,
    /// What happened to the processes, in order ("exited ...; starting it again").
    pub events: Mutex<Vec<String>>,
    stop: AtomicBool,
    /// The watcher thread runs (started by the first spec: a supervisor that keeps
    /// nothing, as a daemon whose features need no process, has none).
    watching: AtomicBool,
    echo: bool,
}

const POLL: Duration = Duration::from_millis(20);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a stopped process may take to exit on its stop signal before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// A process that lived this long failed anew: its next delay starts over.
const HEALTHY_LIFE: Duration = Duration::from_secs(10);

impl Supervisor {
    /// A supervisor knowing `specs`; nothing runs until [`Supervisor::start`]. With
    /// `echo`, events are printed as they happen.
    pub fn new<S: Into<ProcessSpec>>(specs: impl IntoIterator<Item = S>, echo: bool) -> Arc<Self> {
        let sup = Arc::new(Self {
            entries: Mutex::new(BTreeMap::new()),
            events: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            watching: AtomicBool::new(false),
            echo,
        });
        for s in specs {
            sup.add(s.into());
        }
        sup
    }

    /// Knows `spec` (not started), and starts the watcher thread if it is the first.
    /// A spec of the same name is replaced once its process is stopped. The watcher
    /// holds the supervisor weakly: when the last owner drops it, the thread ends, and
    /// with it (the thread every process was spawned from) every tied process.
    pub fn add(self: &Arc<Self>, spec: ProcessSpec) {
        if !self.watching.swap(true, Ordering::SeqCst) {
            let weak = Arc::downgrade(self);
            std::thread::spawn(move || Self::watch(&weak));
        }
        let mut entries = self.entries.lock().expect("supervisor lock");
        match entries.get_mut(&spec.name) {
            Some(e) => e.spec = spec,
            None => {
                entries.insert(
                    spec.name.clone(),
                    Entry {
                        spec,
                        slot: Slot::default(),
                    },
                );
            }
        }
    }

    fn event(&self, line: String) {
        if self.echo {
            use std::io::Write;
            // Nobody reading any more (a closed pipe) is no reason to stop supervising.
            let _ = writeln!(std::io::stdout(), "{line}");
        }
        tracing::info!("{line}");
        self.events.lock().expect("events lock").push(line);
    }

    fn spawn(spec: &ProcessSpec) -> std::io::Result<Child> {
        let netns = spec.netns.as_ref().map(File::open).transpose()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)?;
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // A daemon blocks its stop signals in every thread to take them in turn; its
        // children must not inherit the mask, or a stop signal would never end them.
        // SAFETY: between fork and exec only async-signal-safe calls (sigprocmask).
        unsafe {
            cmd.pre_exec(|| {
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if let Some(ns) = &netns {
            let fd = ns.as_raw_fd();
            // SAFETY: between fork and exec only async-signal-safe calls (setns).
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        if spec.tied {
            crate::child::die_with_parent(&mut cmd, spec.stop_signal);
        } else {
            // Its own process group: a Ctrl-C of the terminal the daemon runs in must
            // not reach what is meant to outlive the daemon.
            cmd.process_group(0);
        }
        cmd.spawn()
    }

    /// The watcher thread: (re)starts wanted processes, reaps exited ones, until the
    /// supervisor is shut down or dropped.
    fn watch(weak: &std::sync::Weak<Self>) {
        while let Some(me) = weak.upgrade()
            && !me.stop.load(Ordering::Relaxed)
        {
            let mut events = Vec::new();
            {
                let mut entries = me.entries.lock().expect("supervisor lock");
                for e in entries.values_mut() {
                    Self::tend(&e.spec, &mut e.slot, &mut events);
                }
            }
            for e in events {
                me.event(e);
            }
            drop(me);
            std::thread::sleep(POLL);
        }
    }

    fn tend(spec: &ProcessSpec, slot: &mut Slot, events: &mut Vec<String>) {
        let what = &spec.what;
        if let Some(child) = &mut slot.child
            && let Ok(Some(status)) = child.try_wait()
        {
            let pid = child.id();
            slot.child = None;
            let lived = slot.started_at.map(|t| t.elapsed()).unwrap_or_default();
            slot.backoff = if lived > HEALTHY_LIFE {
                FIRST_BACKOFF
            } else {
                (slot.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF)
            };
            slot.not_before = Some(Instant::now() + slot.backoff);
            if slot.wanted {
                events.push(format!(
                    "{what} (pid {pid}) exited ({status}); starting it again"
                ));
            }
        }
        let may = slot.not_before.is_none_or(|t| Instant::now() >= t);
        if slot.wanted && slot.child.is_none() && may {
            match Self::spawn(spec) {
                Ok(child) => {
                    slot.starts += 1;
                    if slot.starts > 1 {
                        events.push(format!(
                            "{what} started again (pid {}, start {})",
                            child.id(),
                            slot.starts
                        ));
                    }
                    slot.child = Some(child);
                    slot.started_at = Some(Instant::now());
                    slot.last_error = None;
                }
                Err(e) => {
                    // Tried again after the same doubling delay as an exit.
                    slot.backoff = (slot.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                    slot.not_before = Some(Instant::now() + slot.backoff);
                    slot.last_error = Some(e.to_string());
                }
            }
        }
    }

    /// Wants `name` running and waits until it is up, up to `timeout`.
    pub fn start(&self, name: &str, timeout: Duration) -> Result<u32, SupervisorError> {
        {
            let mut entries = self.entries.lock().expect("supervisor lock");
            let slot = &mut entries
                .get_mut(name)
                .ok_or_else(|| SupervisorError::Unknown(name.to_owned()))?
                .slot;
            slot.wanted = true;
            // A failure of an earlier start is not this one's.
            slot.last_error = None;
        }
        self.wait_ready(name, timeout)
    }

    /// Waits until `name` is up (after a start or a restart).
    pub fn wait_ready(&self, name: &str, timeout: Duration) -> Result<u32, SupervisorError> {
        let deadline = Instant::now() + timeout;
        loop {
            let (pid, err, spec) = {
                let entries = self.entries.lock().expect("supervisor lock");
                let e = entries
                    .get(name)
                    .ok_or_else(|| SupervisorError::Unknown(name.to_owned()))?;
                (
                    e.slot.child.as_ref().map(Child::id),
                    e.slot.last_error.clone(),
                    e.spec.clone(),
                )
            };
            if let Some(cause) = err {
                return Err(SupervisorError::Start {
                    what: spec.what,
                    cause,
                });
            }
            if let Some(pid) = pid {
                match &spec.ready {
                    Ready::Spawned => return Ok(pid),
                    Ready::PidFile(file) => {
                        let written = std::fs::read_to_string(file).unwrap_or_default();
                        if written.trim() == pid.to_string() {
                            return Ok(pid);
                        }
                    }
                }
            }
            if Instant::now() >= deadline {
                let log = std::fs::read_to_string(&spec.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                return Err(SupervisorError::NotReady {
                    what: spec.what,
                    timeout,
                    tail: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// The running process's pid.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.entries
            .lock()
            .expect("supervisor lock")
            .get(name)?
            .slot
            .child
            .as_ref()
            .map(Child::id)
    }

    /// How many times `name` has been started.
    pub fn starts(&self, name: &str) -> u32 {
        self.entries
            .lock()
            .expect("supervisor lock")
            .get(name)
            .map_or(0, |e| e.slot.starts)
    }

    /// Stops `name` (its stop signal, then waits) and does not start it again.
    pub fn stop(&self, name: &str) {
        let (child, what, signal) = {
            let mut entries = self.entries.lock().expect("supervisor lock");
            let Some(e) = entries.get_mut(name) else {
                return;
            };
            e.slot.wanted = false;
            (e.slot.child.take(), e.spec.what.clone(), e.spec.stop_signal)
        };
        if let Some(mut child) = child {
            // SAFETY: kill has no memory preconditions; the pid is our unreaped child.
            unsafe { libc::kill(child.id() as i32, signal) };
            // One that ignores its stop signal is killed after a grace period.
            let deadline = Instant::now() + STOP_GRACE;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
            if matches!(child.try_wait(), Ok(None)) {
                tracing::warn!(what, "did not stop on its signal; killed");
                let _ = child.kill();
            }
            match child.wait() {
                Ok(status) => self.event(format!("{what} stopped ({status})")),
                Err(e) => tracing::warn!(what, error = %e, "cannot reap the process"),
            }
        }
    }

    /// Stops every process and the watcher thread.
    pub fn shutdown(&self) {
        let names: Vec<String> = self
            .entries
            .lock()
            .expect("supervisor lock")
            .keys()
            .cloned()
            .collect();
        for n in names {
            self.stop(&n);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "supervisor_tests.rs"]
mod tests;
