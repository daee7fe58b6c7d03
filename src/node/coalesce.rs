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
    pub fn run(&self, mut sync: impl FnMut() -> Result<(), E>) -> Result<(), E> {
        let mut st = self.state.lock().expect("coalesce lock");
        st.asked += 1;
        let mine = st.asked;
        while st.running {
            if st.done >= mine {
                return st.last.clone();
            }
            st = self.cv.wait(st).expect("coalesce lock");
        }
        if st.done >= mine {
            return st.last.clone();
        }
        st.running = true;
        let mut outcome = Ok(());
        // Each round covers every request made before it read anything.
        while st.done < st.asked {
            let covers = st.asked;
            drop(st);
            outcome = sync();
            st = self.state.lock().expect("coalesce lock");
            st.done = covers;
            st.last = outcome.clone();
            self.cv.notify_all();
            if covers >= mine {
                break;
            }
        }
        st.running = false;
        self.cv.notify_all();
        outcome
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
    fn mx_01_a_failed_sync_is_reported_to_the_callers_it_covered() {
        let c = Coalesced::<String>::default();
        assert_eq!(c.run(|| Err("down".into())), Err("down".into()));
        assert_eq!(c.run(|| Ok(())), Ok(()));
    }
}
