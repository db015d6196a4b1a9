//! The running-job caps: per session and runtime-wide.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

/// Counts running background jobs against two caps: the session's and the
/// runtime's. A slot is a [`SlotGuard`]; dropping it (on every path: exit,
/// kill, timeout, a killed actor's state being dropped) gives the slot back.
#[derive(Clone, Debug)]
pub struct JobSlots {
    session: Arc<AtomicUsize>,
    runtime: Arc<AtomicUsize>,
    session_cap: usize,
    runtime_cap: usize,
}

/// One running background job's slot.
#[derive(Debug)]
pub struct SlotGuard {
    session: Arc<AtomicUsize>,
    runtime: Arc<AtomicUsize>,
}

impl JobSlots {
    /// Slots counted in `session` (capped at `session_cap`) and `runtime`
    /// (capped at `runtime_cap`).
    pub fn new(
        session: Arc<AtomicUsize>,
        session_cap: usize,
        runtime: Arc<AtomicUsize>,
        runtime_cap: usize,
    ) -> Self {
        Self {
            session,
            runtime,
            session_cap,
            runtime_cap,
        }
    }

    /// Takes a slot, or returns the cap that is reached.
    ///
    /// # Errors
    /// The session's or the runtime's cap, whichever is full.
    pub fn try_acquire(&self) -> Result<SlotGuard, usize> {
        if !increment_below(&self.session, self.session_cap) {
            return Err(self.session_cap);
        }
        if !increment_below(&self.runtime, self.runtime_cap) {
            self.session.fetch_sub(1, Ordering::AcqRel);
            return Err(self.runtime_cap);
        }
        Ok(SlotGuard {
            session: Arc::clone(&self.session),
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// Running background jobs in this session.
    pub fn running_in_session(&self) -> usize {
        self.session.load(Ordering::Acquire)
    }
}

fn increment_below(counter: &AtomicUsize, cap: usize) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < cap).then_some(n + 1)
        })
        .is_ok()
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.session.fetch_sub(1, Ordering::AcqRel);
        self.runtime.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_hold_and_dropping_a_guard_gives_the_slot_back() {
        let runtime = Arc::new(AtomicUsize::new(0));
        let a = JobSlots::new(Arc::new(AtomicUsize::new(0)), 2, Arc::clone(&runtime), 3);
        let b = JobSlots::new(Arc::new(AtomicUsize::new(0)), 2, Arc::clone(&runtime), 3);
        let a1 = a.try_acquire().unwrap();
        let _a2 = a.try_acquire().unwrap();
        assert_eq!(a.try_acquire().unwrap_err(), 2, "session cap");
        let _b1 = b.try_acquire().unwrap();
        assert_eq!(b.try_acquire().unwrap_err(), 3, "runtime cap");
        assert_eq!(b.running_in_session(), 1, "a refused slot is not kept");
        drop(a1);
        let _b2 = b.try_acquire().unwrap();
        assert_eq!(runtime.load(Ordering::Acquire), 3);
        drop(_b2);
        assert_eq!(runtime.load(Ordering::Acquire), 2);
    }
}
