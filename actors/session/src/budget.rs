//! The shell restart budget.

use std::collections::VecDeque;
use std::time::Duration;
use std::time::Instant;

/// At most `max` failures within a sliding `window` (Erlang/OTP's restart
/// intensity): a shell that fails more often is not restarted until the window
/// has passed, so a crash loop cannot spin.
#[derive(Debug)]
pub struct RestartBudget {
    max: u32,
    window: Duration,
    failures: VecDeque<Instant>,
}

impl RestartBudget {
    /// A budget of `max` failures per `window`.
    pub fn new(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            failures: VecDeque::new(),
        }
    }

    /// Records a failure at `now`. Returns `None` if a restart is allowed, or
    /// the instant until which restarts are refused.
    pub fn charge(&mut self, now: Instant) -> Option<Instant> {
        self.forget_before(now);
        self.failures.push_back(now);
        if self.failures.len() as u64 > u64::from(self.max) {
            self.failures.front().map(|oldest| *oldest + self.window)
        } else {
            None
        }
    }

    /// Failures counted in the window ending at `now`.
    pub fn failures(&mut self, now: Instant) -> u32 {
        self.forget_before(now);
        u32::try_from(self.failures.len()).unwrap_or(u32::MAX)
    }

    fn forget_before(&mut self, now: Instant) {
        while let Some(oldest) = self.failures.front() {
            if now.duration_since(*oldest) >= self.window {
                self.failures.pop_front();
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_the_budget_until_the_window_passes() {
        let start = Instant::now();
        let mut budget = RestartBudget::new(2, Duration::from_secs(30));
        assert_eq!(budget.charge(start), None);
        assert_eq!(budget.charge(start + Duration::from_secs(1)), None);
        assert_eq!(
            budget.charge(start + Duration::from_secs(2)),
            Some(start + Duration::from_secs(30))
        );
        assert_eq!(budget.failures(start + Duration::from_secs(31)), 1);
        assert_eq!(budget.charge(start + Duration::from_secs(40)), None);
    }
}
