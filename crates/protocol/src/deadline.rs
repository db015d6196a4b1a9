//! Deadlines from durations that may come from input: never a panic.

use std::time::Duration;
use std::time::Instant;

/// A century: what "no deadline" means where an `Instant` is needed.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `Instant::now() + after`, saturating at a century from now instead of
/// panicking on overflow (`Duration::MAX` means "as long as it takes").
///
/// ```
/// use std::time::Duration;
/// use std::time::Instant;
///
/// let soon = shellvisor_protocol::deadline_after(Duration::from_secs(1));
/// assert!(soon > Instant::now());
/// let never = shellvisor_protocol::deadline_after(Duration::MAX);
/// assert!(never > soon);
/// ```
pub fn deadline_after(after: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(after.min(FAR))
        .or_else(|| now.checked_add(Duration::from_secs(24 * 3600)))
        .unwrap_or(now)
}
