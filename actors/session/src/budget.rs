//! The shell restart budget.

use std::collections::VecDeque;
use std::time::Duration;
use std::time::Instant;

/// At most `max` failures within a sliding `window` (Erlang/OTP's restart
/// intensity): a shell that fails more often is not restarted until the window
/// has passed, so a crash loop cannot spin. The budget also remembers why
/// the shell last failed, for the `shell_unavailable` answer.
#[derive(Debug)]
pub(crate) struct RestartBudget {
    max: u32,
    window: Duration,
    failures: VecDeque<Instant>,
    /// Set when the budget is spent: restarts are refused until then.
    unavailable_until: Option<Instant>,
    last_failure: Option<String>,
}

/// Why a shell may not be started now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Spent {
    /// Failures counted in the window.
    pub(crate) restarts: u32,
    /// Why the shell last failed.
    pub(crate) last_failure: String,
}

impl RestartBudget {
    /// A budget of `max` failures per `window`.
    pub(crate) fn new(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            failures: VecDeque::new(),
            unavailable_until: None,
            last_failure: None,
        }
    }

    /// Records a failure at `now` and why. Returns whether a restart is allowed.
    pub(crate) fn charge(&mut self, now: Instant, reason: &str) -> bool {
        self.last_failure = Some(reason.to_owned());
        self.forget_before(now);
        self.failures.push_back(now);
        if self.failures.len() as u64 > u64::from(self.max) {
            self.unavailable_until = self.failures.front().map(|oldest| *oldest + self.window);
            false
        } else {
            true
        }
    }

    /// Whether a shell may be started at `now`.
    ///
    /// # Errors
    /// [`Spent`] while the budget is spent.
    pub(crate) fn check(&mut self, now: Instant) -> Result<(), Spent> {
        match self.unavailable_until {
            Some(until) if now < until => {
                self.forget_before(now);
                Err(Spent {
                    restarts: u32::try_from(self.failures.len()).unwrap_or(u32::MAX),
                    last_failure: self
                        .last_failure
                        .clone()
                        .unwrap_or_else(|| "unknown".to_owned()),
                })
            }
            _ => {
                self.unavailable_until = None;
                Ok(())
            }
        }
    }

    /// Whether restarts are being refused (nothing is started meanwhile).
    pub(crate) fn is_spent(&self) -> bool {
        self.unavailable_until.is_some()
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
        assert!(budget.charge(start, "one"));
        assert!(budget.charge(start + Duration::from_secs(1), "two"));
        assert!(!budget.is_spent());
        assert!(!budget.charge(start + Duration::from_secs(2), "three"));
        assert!(budget.is_spent());
        assert_eq!(
            budget.check(start + Duration::from_secs(3)),
            Err(Spent {
                restarts: 3,
                last_failure: "three".to_owned()
            })
        );
        assert_eq!(budget.check(start + Duration::from_secs(30)), Ok(()));
        assert!(!budget.is_spent());
        assert!(budget.charge(start + Duration::from_secs(40), "four"));
    }
}
