//! Small helpers for the tasks a Shell owns.

use tokio::task::JoinHandle;

/// Aborts a task when dropped, so a Shell's helper tasks never outlive its state.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
