//! One `juneau node` process per Node namespace, kept running as a DaemonSet keeps its
//! Pods: a daemon that exits is started again, and the run says so.
//!
//! Every daemon is spawned by the supervisor's own thread with a parent-death signal
//! (`child::die_with_parent`, tied to the thread that forks), so when the standalone
//! run dies (even by SIGKILL) its daemons get SIGTERM and exit, and nothing of theirs
//! serves on.
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

/// How one Node's daemon is started.
#[derive(Clone, Debug)]
pub struct DaemonSpec {
    pub node: String,
    /// The Node's network namespace (`/run/netns/<name>`).
    pub netns: PathBuf,
    pub args: Vec<String>,
    pub log: PathBuf,
    pub pid_file: PathBuf,
}

#[derive(Default)]
struct Slot {
    child: Option<Child>,
    /// When the current child started, and the earliest the next may start (a
    /// daemon that keeps failing is restarted with a doubling delay, as the kubelet's
    /// CrashLoopBackOff, from 100 ms up to 5 s).
    started_at: Option<Instant>,
    not_before: Option<Instant>,
    backoff: Duration,
    /// Keep it running (restart when it exits).
    wanted: bool,
    starts: u32,
    last_error: Option<String>,
}

pub struct Supervisor {
    specs: BTreeMap<String, DaemonSpec>,
    slots: Mutex<BTreeMap<String, Slot>>,
    /// What happened to the daemons, in order ("started", "exited ...; started again").
    pub events: Mutex<Vec<String>>,
    stop: AtomicBool,
    echo: bool,
}

fn juneau_binary() -> PathBuf {
    super::sibling_binary("juneau")
}

impl Supervisor {
    /// Starts the supervisor thread; no daemon runs until [`Supervisor::start`].
    /// With `echo`, events are printed as they happen.
    pub fn new(specs: Vec<DaemonSpec>, echo: bool) -> Arc<Self> {
        let sup = Arc::new(Self {
            slots: Mutex::new(
                specs
                    .iter()
                    .map(|s| (s.node.clone(), Slot::default()))
                    .collect(),
            ),
            specs: specs.into_iter().map(|s| (s.node.clone(), s)).collect(),
            events: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            echo,
        });
        let me = sup.clone();
        std::thread::spawn(move || me.watch());
        sup
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

    fn spawn(spec: &DaemonSpec) -> std::io::Result<Child> {
        let netns = File::open(&spec.netns)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)?;
        let fd = netns.as_raw_fd();
        let mut cmd = Command::new(juneau_binary());
        cmd.arg("node")
            .args(&spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: between fork and exec only async-signal-safe calls (setns).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // SIGTERM: the daemon exits cleanly, its datapath stays pinned.
        crate::child::die_with_parent(&mut cmd, libc::SIGTERM);
        let child = cmd.spawn();
        drop(netns);
        child
    }

    /// The supervisor thread: (re)starts wanted daemons, reaps exited ones.
    fn watch(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            let mut events = Vec::new();
            {
                let mut slots = self.slots.lock().expect("slots lock");
                for (node, slot) in slots.iter_mut() {
                    let mut exited = None;
                    if let Some(child) = &mut slot.child
                        && let Ok(Some(status)) = child.try_wait()
                    {
                        exited = Some((child.id(), status));
                    }
                    if let Some((pid, status)) = exited {
                        slot.child = None;
                        let lived = slot.started_at.map(|t| t.elapsed()).unwrap_or_default();
                        slot.backoff = if lived > Duration::from_secs(10) {
                            Duration::from_millis(100)
                        } else {
                            (slot.backoff * 2)
                                .clamp(Duration::from_millis(100), Duration::from_secs(5))
                        };
                        slot.not_before = Some(Instant::now() + slot.backoff);
                        if slot.wanted {
                            events.push(format!(
                                "node {node}: daemon (pid {pid}) exited ({status}); starting it again"
                            ));
                        }
                    }
                    let may = slot.not_before.is_none_or(|t| Instant::now() >= t);
                    if slot.wanted && slot.child.is_none() && may {
                        match Self::spawn(&self.specs[node]) {
                            Ok(child) => {
                                slot.starts += 1;
                                if slot.starts > 1 {
                                    events.push(format!(
                                        "node {node}: daemon started again (pid {}, start {})",
                                        child.id(),
                                        slot.starts
                                    ));
                                }
                                slot.child = Some(child);
                                slot.started_at = Some(Instant::now());
                                slot.last_error = None;
                            }
                            Err(e) => slot.last_error = Some(e.to_string()),
                        }
                    }
                }
            }
            for e in events {
                self.event(e);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wants `node`'s daemon running and waits until it serves (its pid file names
    /// it), up to `timeout`.
    pub fn start(&self, node: &str, timeout: Duration) -> Result<u32, String> {
        self.slots
            .lock()
            .expect("slots lock")
            .get_mut(node)
            .ok_or_else(|| format!("no daemon for node {node:?}"))?
            .wanted = true;
        self.wait_ready(node, timeout)
    }

    /// Waits until the daemon of `node` serves (after a start or a restart).
    pub fn wait_ready(&self, node: &str, timeout: Duration) -> Result<u32, String> {
        let spec = &self.specs[node];
        let deadline = Instant::now() + timeout;
        loop {
            let (pid, err) = {
                let slots = self.slots.lock().expect("slots lock");
                let slot = &slots[node];
                (slot.child.as_ref().map(Child::id), slot.last_error.clone())
            };
            if let Some(e) = err {
                return Err(format!("node {node}: cannot start its daemon: {e}"));
            }
            if let Some(pid) = pid {
                let written = std::fs::read_to_string(&spec.pid_file).unwrap_or_default();
                if written.trim() == pid.to_string() {
                    return Ok(pid);
                }
            }
            if Instant::now() >= deadline {
                let log = std::fs::read_to_string(&spec.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                return Err(format!(
                    "node {node}: its daemon did not come up within {timeout:?}; last log lines: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running daemon's pid.
    pub fn pid(&self, node: &str) -> Option<u32> {
        self.slots.lock().expect("slots lock")[node]
            .child
            .as_ref()
            .map(Child::id)
    }

    /// Stops `node`'s daemon (SIGTERM, then waits) and does not start it again.
    pub fn stop(&self, node: &str) {
        let child = {
            let mut slots = self.slots.lock().expect("slots lock");
            let slot = slots.get_mut(node).expect("known node");
            slot.wanted = false;
            slot.child.take()
        };
        if let Some(mut child) = child {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            match child.wait() {
                Ok(status) => self.event(format!("node {node}: daemon stopped ({status})")),
                Err(e) => tracing::warn!(node, error = %e, "cannot reap the daemon"),
            }
        }
    }

    /// Stops every daemon and the supervisor thread.
    pub fn shutdown(&self) {
        let nodes: Vec<String> = self.specs.keys().cloned().collect();
        for n in nodes {
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
