//! Guards for the tasks and timers an actor owns.

use std::time::Duration;
use std::time::Instant;

use ractor::MessagingErr;
use tokio::task::JoinHandle;

/// Aborts a task (a helper task, or a ractor `send_after`/`send_interval`
/// timer) when dropped, so it never outlives the state that holds it, even
/// when the actor is killed and its state dropped without `post_stop`.
#[derive(Debug)]
pub struct AbortOnDrop<T>(pub JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A ractor timer (`send_after`) sending `M`, aborted when dropped.
pub type Timer<M> = AbortOnDrop<Result<(), MessagingErr<M>>>;

/// The instant `after` from now. A duration too long to add (a setting of
/// `u64::MAX` seconds means "as long as it takes") gives an instant about
/// 136 years away, which no timer reaches.
pub fn instant_after(after: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(after).unwrap_or_else(|| now + NEVER)
}

/// Further than any timer goes, and still an instant on every platform.
const NEVER: Duration = Duration::from_secs(1 << 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_duration_is_far_not_a_panic() {
        let far = instant_after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        let soon = instant_after(Duration::from_secs(1));
        assert!(soon < Instant::now() + Duration::from_secs(2));
    }
}
