//! The threads that serve CNI requests: kept and reused, never one made per request.
//!
//! A request blocks on netlink, on RTNL and on the cluster (an ADD may wait seconds for
//! its NICs to be allocated), so each runs on an OS thread of its own, never on a tokio
//! worker. Making that thread per request cost, with a hundred ADDs at once on two
//! cores, a stack and a signal stack mapped and unmapped each time, all of them
//! serialized on the process's memory-map lock, and the accept loop spawning them one
//! after another. Here a request goes to an idle thread when there is one; a new thread
//! is made only when none is idle, and it stays for the next burst (the pool grows to
//! the largest number of requests served at once, and a few are made up front).
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
    mpsc::{Receiver, Sender, channel},
};

type Job = Box<dyn FnOnce() + Send>;

pub struct Workers {
    name: &'static str,
    queue: Mutex<Sender<Job>>,
    shared: Arc<Shared>,
}

struct Shared {
    jobs: Mutex<Receiver<Job>>,
    /// Threads waiting for a job (or about to).
    idle: AtomicUsize,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkersError {
    #[error("cannot start a {name} thread: {source}")]
    Spawn {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("the {0} threads are gone")]
    Closed(&'static str),
}

impl Workers {
    /// A pool whose threads are named `name`, with `warm` of them made at once.
    pub fn new(name: &'static str, warm: usize) -> Result<Workers, WorkersError> {
        let pool = Workers::empty(name);
        pool.warm(warm)?;
        Ok(pool)
    }

    /// A pool with no thread yet ([`Workers::warm`] or the first job makes them).
    pub fn empty(name: &'static str) -> Workers {
        let (tx, rx) = channel();
        Workers {
            name,
            queue: Mutex::new(tx),
            shared: Arc::new(Shared {
                jobs: Mutex::new(rx),
                idle: AtomicUsize::new(0),
            }),
        }
    }

    /// Makes `n` more idle threads.
    pub fn warm(&self, n: usize) -> Result<(), WorkersError> {
        (0..n).try_for_each(|_| self.spawn(None))
    }

    /// Runs `job` on an idle thread, or on a new one when none is idle (the job is
    /// handed to it directly, so callers racing for the last idle thread can never leave
    /// a job queued with nobody to take it).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> Result<(), WorkersError> {
        let claimed = self
            .shared
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !claimed {
            return self.spawn(Some(Box::new(job)));
        }
        self.queue
            .lock()
            .expect("worker queue lock")
            .send(Box::new(job))
            .map_err(|_| WorkersError::Closed(self.name))
    }

    /// Adds a thread: idle from the start, or running `first` and then idle.
    fn spawn(&self, first: Option<Job>) -> Result<(), WorkersError> {
        let shared = self.shared.clone();
        let warm = first.is_none();
        if warm {
            shared.idle.fetch_add(1, Ordering::AcqRel);
        }
        std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || {
                if let Some(job) = first {
                    job();
                    shared.idle.fetch_add(1, Ordering::AcqRel);
                }
                shared.serve()
            })
            .map(drop)
            .map_err(|source| {
                if warm {
                    self.shared.idle.fetch_sub(1, Ordering::AcqRel);
                }
                WorkersError::Spawn {
                    name: self.name,
                    source,
                }
            })
    }

    /// Threads waiting for a job.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.shared.idle.load(Ordering::Acquire)
    }
}

impl Shared {
    fn serve(&self) {
        loop {
            let job = self.jobs.lock().expect("worker jobs lock").recv();
            let Ok(job) = job else {
                // The pool is gone.
                return;
            };
            job();
            self.idle.fetch_add(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Barrier, mpsc};

    #[test]
    fn mx_01_an_empty_pool_makes_threads_when_warmed_or_asked() {
        let pool = Workers::empty("test-empty");
        assert_eq!(pool.idle(), 0);
        let (tx, rx) = mpsc::channel();
        let t = tx.clone();
        pool.run(move || t.send(1).unwrap()).unwrap();
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10)), Ok(1));
        pool.warm(3).unwrap();
        // The first job's thread went idle after it, beside the three warmed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pool.idle() < 4 {
            assert!(std::time::Instant::now() < deadline, "idle {}", pool.idle());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(pool.idle(), 4);
    }

    #[test]
    fn mx_01_requests_run_at_once_on_reused_threads() {
        let pool = Workers::new("test-worker", 2).unwrap();
        assert_eq!(pool.idle(), 2);
        // Four jobs that can only finish together: the pool must run them at once.
        let gate = Arc::new(Barrier::new(4));
        let (tx, rx) = mpsc::channel();
        for i in 0..4 {
            let (gate, tx) = (gate.clone(), tx.clone());
            pool.run(move || {
                gate.wait();
                tx.send((i, std::thread::current().id())).unwrap();
            })
            .unwrap();
        }
        // Run one at a time, they would wait at the barrier forever: fail instead.
        let first: Vec<_> = (0..4)
            .map(|_| {
                rx.recv_timeout(std::time::Duration::from_secs(10))
                    .expect("the four jobs did not run at once")
            })
            .collect();
        let threads: std::collections::BTreeSet<_> =
            first.iter().map(|(_, t)| format!("{t:?}")).collect();
        assert_eq!(threads.len(), 4, "four jobs at once on four threads");
        // Once they are idle again, the next jobs reuse them: no fifth thread.
        for _ in 0..8 {
            while pool.idle() < 4 {
                std::thread::yield_now();
            }
            let tx = tx.clone();
            pool.run(move || tx.send((9, std::thread::current().id())).unwrap())
                .unwrap();
            let (_, t) = rx.recv().unwrap();
            assert!(threads.contains(&format!("{t:?}")), "a new thread was made");
        }
    }
}
