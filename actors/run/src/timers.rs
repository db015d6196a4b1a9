//! Guards for the tasks and timers an actor owns.

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
