//! Where an ADD's time goes, logged with it: a burst of Pods shares the Node's CPUs, the
//! datapath's lock, the kernel's netlink lock (RTNL) and the API server, and each part
//! shows which one it waited on.
//!
//! Besides the wall time of each part, the handler thread's own scheduling counters
//! (`/proc/thread-self/schedstat`: time on a CPU, time runnable but waiting for one) are
//! kept for its netlink steps. What remains of a step's wall time is time asleep: for a
//! netlink request, mostly the wait for RTNL behind other sandboxes' work. So the log
//! tells a Node short of CPU from a kernel lock held by others.
use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

#[derive(Clone, Copy, Debug)]
pub enum Part {
    /// veth pairs, addresses and routes (netlink): the sum of [`Part::Veth`],
    /// [`Part::PodRoutes`] and [`Part::Door`], never counted on its own.
    Links,
    /// Waiting for the datapath's lock.
    Lock,
    /// Attaching the ports and writing their maps, under the lock.
    Attach,
    /// Writing the NetworkEndpoints (the API server); for a NIC without an ElasticIP
    /// on a thread of its own while the NIC is plumbed, so it overlaps the netlink
    /// steps instead of adding to them.
    Endpoint,
    /// Opening netlink to the Node's and the Pod's namespaces.
    Session,
    /// Making the veth pairs (with their clsact qdisc when ports take filters).
    Veth,
    /// The Pod's addresses and routes.
    PodRoutes,
    /// A default-Subnet NIC's door from its Node (rp_filter, the host route).
    Door,
}

const PARTS: usize = 8;
const LINK_STEPS: [Part; 3] = [Part::Veth, Part::PodRoutes, Part::Door];

/// A thread's scheduling counters, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sched {
    /// On a CPU.
    pub cpu_ns: u64,
    /// Runnable, waiting for a CPU.
    pub runq_ns: u64,
}

impl Sched {
    /// The calling thread's counters; `None` on a kernel that keeps none
    /// (CONFIG_SCHED_INFO off).
    pub fn of_this_thread() -> Option<Sched> {
        Self::parse(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
    }

    /// `schedstat`'s first two fields: "<on cpu ns> <waiting ns> <timeslices>".
    fn parse(text: &str) -> Option<Sched> {
        let mut f = text.split_whitespace().map(str::parse::<u64>);
        Some(Sched {
            cpu_ns: f.next()?.ok()?,
            runq_ns: f.next()?.ok()?,
        })
    }

    /// What accrued from `earlier` to `self`.
    pub fn since(self, earlier: Sched) -> Sched {
        Sched {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            runq_ns: self.runq_ns.saturating_sub(earlier.runq_ns),
        }
    }
}

/// A step's start: the wall clock and the thread's counters.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    at: Instant,
    sched: Option<Sched>,
}

impl Step {
    pub fn now() -> Step {
        Step {
            at: Instant::now(),
            sched: Sched::of_this_thread(),
        }
    }
}

/// Microseconds spent in each [`Part`], and of them on a CPU and waiting for one
/// (atomics: a context may be shared with a thread inside the Pod's namespace).
#[derive(Debug, Default)]
pub struct AddTimes {
    wall: [AtomicU64; PARTS],
    cpu: [AtomicU64; PARTS],
    runq: [AtomicU64; PARTS],
}

fn micros(ns: u64) -> u64 {
    ns / 1_000
}

impl AddTimes {
    /// Counts the time since `since` to `part`. A step must end on the thread it
    /// started on for its CPU counters to mean anything (every part does).
    pub fn add(&self, part: Part, since: Step) {
        let us = u64::try_from(since.at.elapsed().as_micros()).unwrap_or(u64::MAX);
        let i = part as usize;
        self.wall[i].fetch_add(us, Ordering::Relaxed);
        if let (Some(then), Some(now)) = (since.sched, Sched::of_this_thread()) {
            let d = now.since(then);
            self.cpu[i].fetch_add(micros(d.cpu_ns), Ordering::Relaxed);
            self.runq[i].fetch_add(micros(d.runq_ns), Ordering::Relaxed);
        }
    }

    /// Counts `took`, measured on another thread, to `part` (wall time only).
    pub fn add_elapsed(&self, part: Part, took: std::time::Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.wall[part as usize].fetch_add(us, Ordering::Relaxed);
    }

    fn sum(&self, counters: &[AtomicU64; PARTS], part: Part) -> f64 {
        match part {
            Part::Links => LINK_STEPS.iter().map(|p| self.sum(counters, *p)).sum(),
            p => counters[p as usize].load(Ordering::Relaxed) as f64 / 1e3,
        }
    }

    /// The time spent in `part`, in ms ([`Part::Links`]: the sum of its steps).
    pub fn ms(&self, part: Part) -> f64 {
        self.sum(&self.wall, part)
    }

    /// Of [`AddTimes::ms`], the ms the handler thread ran on a CPU.
    pub fn cpu_ms(&self, part: Part) -> f64 {
        self.sum(&self.cpu, part)
    }

    /// Of [`AddTimes::ms`], the ms the handler thread waited for a CPU.
    pub fn runq_ms(&self, part: Part) -> f64 {
        self.sum(&self.runq, part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mx_01_schedstat_reads_cpu_and_runqueue_time_and_links_sum_their_steps() {
        assert_eq!(
            Sched::parse("1500 2500 7\n"),
            Some(Sched {
                cpu_ns: 1500,
                runq_ns: 2500
            })
        );
        assert_eq!(Sched::parse("garbage"), None);
        let t = AddTimes::default();
        t.wall[Part::Veth as usize].store(2_000, Ordering::Relaxed);
        t.wall[Part::Door as usize].store(500, Ordering::Relaxed);
        t.wall[Part::Lock as usize].store(9_000, Ordering::Relaxed);
        assert_eq!(t.ms(Part::Links), 2.5, "only the netlink steps");
        // Counters read out of order never count backwards.
        let (early, late) = (
            Sched {
                cpu_ns: 5_000,
                runq_ns: 9_000,
            },
            Sched {
                cpu_ns: 7_000,
                runq_ns: 8_000,
            },
        );
        assert_eq!(
            late.since(early),
            Sched {
                cpu_ns: 2_000,
                runq_ns: 0
            }
        );
        // A part timed on another thread counts its wall time alone.
        t.add_elapsed(Part::Endpoint, std::time::Duration::from_micros(1_500));
        assert_eq!(t.ms(Part::Endpoint), 1.5);
        assert_eq!(t.cpu_ms(Part::Endpoint), 0.0);
    }
}
