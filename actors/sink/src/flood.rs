//! The flood guard on streamed output: at most so many bytes per job and
//! second reach subscribers; the rest is left out, counted, and announced
//! once as a range subscribers can read by offset.

use std::time::Duration;
use std::time::Instant;

/// The window the byte budget is counted over.
const WINDOW: Duration = Duration::from_secs(1);

/// A range of streamed output left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gap {
    pub(crate) offset: u64,
    pub(crate) bytes: u64,
    pub(crate) events: u64,
}

/// One job's streaming budget.
#[derive(Debug)]
pub(crate) struct FloodGuard {
    /// Bytes per window (`0`: no limit).
    limit: u64,
    window_start: Instant,
    sent_in_window: u64,
    gap: Option<Gap>,
}

impl FloodGuard {
    pub(crate) fn new(bytes_per_sec: u64) -> Self {
        Self {
            limit: bytes_per_sec,
            window_start: Instant::now(),
            sent_in_window: 0,
            gap: None,
        }
    }

    /// Whether an event of `len` bytes at `offset` may be sent now; if not
    /// it joins the gap. The first event of a window always goes.
    pub(crate) fn admit(&mut self, offset: u64, len: u64) -> bool {
        if self.limit == 0 {
            return true;
        }
        if self.window_start.elapsed() >= WINDOW {
            self.window_start = Instant::now();
            self.sent_in_window = 0;
        }
        if self.sent_in_window == 0 || self.sent_in_window + len <= self.limit {
            self.sent_in_window += len;
            return true;
        }
        let gap = self.gap.get_or_insert(Gap {
            offset,
            bytes: 0,
            events: 0,
        });
        gap.bytes += len;
        gap.events += 1;
        false
    }

    /// The range left out since the last one was announced, if any.
    pub(crate) fn take_gap(&mut self) -> Option<Gap> {
        self.gap.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_budget_and_its_gap_counted_once() {
        let mut guard = FloodGuard::new(100);
        assert!(guard.admit(0, 60));
        assert!(guard.admit(60, 40));
        assert!(!guard.admit(100, 50));
        assert!(!guard.admit(150, 50));
        assert_eq!(
            guard.take_gap(),
            Some(Gap {
                offset: 100,
                bytes: 100,
                events: 2
            })
        );
        assert_eq!(guard.take_gap(), None);
        let mut open = FloodGuard::new(0);
        assert!((0..1000).all(|i| open.admit(i * 1000, 1000)));
        // A single event over the budget still goes, once per window.
        let mut small = FloodGuard::new(10);
        assert!(small.admit(0, 500));
        assert!(!small.admit(500, 1));
    }
}
