//! Ids handed out lowest first, each freed one cooling before it is handed out again.
use std::{
    collections::{BTreeSet, VecDeque},
    time::{Duration, Instant},
};

use super::DataplaneError;

/// How long a freed id rests before it is handed out again: far longer than any
/// program run that could have read it just before it was freed (a packet's run
/// takes microseconds), so that such a run finds what the id named.
const COOLING: Duration = Duration::from_secs(1);

/// Ids `1..max`, handed out lowest first and taken back when freed (O(log n) each),
/// each freed one after [`COOLING`].
#[derive(Debug)]
pub(super) struct Ids {
    free: BTreeSet<u32>,
    cooling: VecDeque<(u32, Instant)>,
    /// [`COOLING`], but in unit tests.
    rest: Duration,
    next: u32,
    max: u32,
    what: &'static str,
}

impl Ids {
    pub(super) fn new(max: u32, what: &'static str) -> Self {
        Self {
            free: BTreeSet::new(),
            cooling: VecDeque::new(),
            rest: COOLING,
            next: 1,
            max,
            what,
        }
    }

    pub(super) fn take(&mut self) -> Result<u32, DataplaneError> {
        while let Some((id, at)) = self.cooling.front().copied() {
            if at.elapsed() < self.rest {
                break;
            }
            self.cooling.pop_front();
            self.free.insert(id);
        }
        if let Some(id) = self.free.pop_first() {
            return Ok(id);
        }
        if self.next >= self.max {
            return Err(DataplaneError::Full(self.what, self.max));
        }
        self.next += 1;
        Ok(self.next - 1)
    }

    /// `id` is free: handed out again once it cooled.
    pub(super) fn give_back(&mut self, id: u32) {
        self.cooling.push_back((id, Instant::now()));
    }

    /// Ids that a previous daemon's pinned state still names (a restart, before the
    /// first sync has replaced it): none is handed out before it cooled, so that the
    /// new daemon's first writes never land on what the old frontends and tables still
    /// point at. Called on a fresh set only.
    pub(super) fn reserve(&mut self, used: impl IntoIterator<Item = u32>) {
        let used: BTreeSet<u32> = used
            .into_iter()
            .filter(|id| *id != 0 && *id < self.max)
            .collect();
        let Some(&top) = used.last() else {
            return;
        };
        let now = Instant::now();
        for id in self.next..=top {
            if used.contains(&id) {
                self.cooling.push_back((id, now));
            } else {
                self.free.insert(id);
            }
        }
        self.next = self.next.max(top + 1);
    }

    /// `id` was never seen by a program (taken by a sync that failed before it wrote
    /// anything naming it): free at once.
    pub(super) fn unused(&mut self, id: u32) {
        self.free.insert(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_id_is_handed_out_again_only_once_it_cooled() {
        let mut ids = Ids::new(4, "test ids");
        assert_eq!((ids.take().unwrap(), ids.take().unwrap()), (1, 2));
        ids.give_back(1);
        // Still cooling (a second): the next id is a new one.
        assert_eq!(ids.take().unwrap(), 3);
        assert!(matches!(
            ids.take(),
            Err(DataplaneError::Full("test ids", 4))
        ));
        // Cooled (no rest): 1 comes back, lowest first.
        ids.rest = Duration::ZERO;
        ids.give_back(3);
        assert_eq!((ids.take().unwrap(), ids.take().unwrap()), (1, 3));
        // An id no program ever saw is free at once.
        ids.rest = COOLING;
        ids.unused(2);
        assert_eq!(ids.take().unwrap(), 2);
    }

    #[test]
    fn ids_a_previous_daemon_left_in_use_cool_first() {
        let mut ids = Ids::new(100, "test ids");
        ids.reserve([3, 5]);
        // The gaps are free, the reserved ones cooling, the next new one after them.
        let taken: Vec<u32> = (0..4).map(|_| ids.take().unwrap()).collect();
        assert_eq!(taken, [1, 2, 4, 6]);
        ids.rest = Duration::ZERO;
        assert_eq!(ids.take().unwrap(), 3);
    }
}
