//! One sync at a time, shared by everyone who asked for it meanwhile. Every CNI request
//! and every change of the cluster asks the daemon to bring its maps in line with the
//! cluster; a hundred ADDs at once used to run a hundred full syncs one after another
//! (each reading the whole cluster), which is what their latency was made of. Now a
//! caller is served by the first sync that *starts* after its request, whoever runs it:
//! what it needs (its own NIC's segment, a new endpoint) is in that sync's read.
use std::sync::{Condvar, Mutex};

struct State<E> {
    /// Requests so far (each caller's number).
    asked: u64,
    /// Every request up to this one is covered by a finished sync.
    done: u64,
    running: bool,
    /// The outcome of the last finished sync, for the callers it covered.
    last: Result<(), E>,
}

pub struct Coalesced<E> {
    state: Mutex<State<E>>,
    cv: Condvar,
}

impl<E> Default for Coalesced<E> {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                asked: 0,
                done: 0,
                running: false,
                last: Ok(()),
            }),
            cv: Condvar::new(),
        }
    }
}

impl<E: Clone> Coalesced<E> {
    /// Returns once a sync that started after this call has finished: runs `sync` on
    /// this thread when none is running, else waits for the running one's successor.
    /// The result is that sync's, for every caller it covered.
    pub fn run(&self, sync: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
        let mut st = self.lock();
        st.asked += 1;
        let mine = st.asked;
        while st.running {
            if st.done >= mine {
                return st.last.clone();
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.done >= mine {
            return st.last.clone();
        }
        st.running = true;
        // This sync covers every request made before it reads anything.
        let mut release = Release {
            owner: self,
            finished: None,
            covers: st.asked,
        };
        drop(st);
        let outcome = sync();
        release.finished = Some(outcome.clone());
        drop(release);
        outcome
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<E>> {
        // No code panics while holding it (syncs run without it): never poisoned in
        // practice, and its state stays consistent if it were.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    fn asked(&self) -> u64 {
        self.lock().asked
    }
}

/// Ends a sync, also when it panicked: the callers it would have covered are woken,
/// and the first of them runs the next one instead of all waiting forever.
struct Release<'a, E> {
    owner: &'a Coalesced<E>,
    covers: u64,
    /// The sync's outcome; `None` when it panicked (nothing is covered then).
    finished: Option<Result<(), E>>,
}

impl<E> Drop for Release<'_, E> {
    fn drop(&mut self) {
        let mut st = self.owner.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(outcome) = self.finished.take() {
            st.done = self.covers;
            st.last = outcome;
        }
        st.running = false;
        self.owner.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    };

    use super::*;

    #[test]
    fn mx_01_many_callers_share_few_syncs_and_each_is_covered_by_one_that_read_its_write() {
        let c = Arc::new(Coalesced::<()>::default());
        // A counter stands in for the cluster: each sync reads it when it starts and
        // records what it read when it ends.
        let written = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..64)
            .map(|_| {
                let (c, written, finished) = (c.clone(), written.clone(), finished.clone());
                std::thread::spawn(move || {
                    let mine = written.fetch_add(1, Ordering::SeqCst) + 1;
                    c.run(|| {
                        let read = written.load(Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        finished.lock().unwrap().push(read);
                        Ok(())
                    })
                    .unwrap();
                    // Run here or by another caller, a sync that read our write ended.
                    let f = finished.lock().unwrap();
                    assert!(f.iter().any(|&r| r >= mine), "{mine} not covered by {f:?}");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = finished.lock().unwrap().len();
        assert!((1..32).contains(&n), "{n} syncs for 64 callers");
    }

    #[test]
    fn mx_01_a_failed_sync_is_reported_to_every_caller_it_covered() {
        let c = Arc::new(Coalesced::<String>::default());
        let syncs = Arc::new(AtomicU64::new(0));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        // A sync runs and holds until two more callers are waiting behind it.
        let first = {
            let (c, syncs) = (c.clone(), syncs.clone());
            std::thread::spawn(move || {
                c.run(|| {
                    syncs.fetch_add(1, Ordering::SeqCst);
                    wait.recv().unwrap();
                    Ok(())
                })
            })
        };
        while c.asked() < 1 {
            std::thread::yield_now();
        }
        let later: Vec<_> = (0..2)
            .map(|_| {
                let (c, syncs) = (c.clone(), syncs.clone());
                std::thread::spawn(move || {
                    c.run(|| {
                        syncs.fetch_add(1, Ordering::SeqCst);
                        Err("down".to_owned())
                    })
                })
            })
            .collect();
        while c.asked() < 3 {
            std::thread::yield_now();
        }
        go.send(()).unwrap();
        assert_eq!(first.join().unwrap(), Ok(()));
        // One of them ran the second sync; the other was covered by it and gets its
        // failure too.
        for t in later {
            assert_eq!(t.join().unwrap(), Err("down".to_owned()));
        }
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn mx_01_a_sync_that_panics_does_not_stop_the_next_ones() {
        let c = Coalesced::<String>::default();
        let hit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.run(|| panic!("a sync failed hard"))
        }));
        assert!(hit.is_err());
        assert_eq!(c.run(|| Ok(())), Ok(()), "the next caller runs a sync");
    }
}
