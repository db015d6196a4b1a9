//! How the I/O task tells its Shell that a run completed, without a message.
//!
//! A message would wake the Shell's task at the same moment the run's Job is
//! woken with the report, and two tasks woken at once make tokio wake a
//! parked worker thread to take one of them: a futex wake and a thread
//! switch per run (on one CPU, about 20 µs of the round trip). The Shell
//! needs to know only when it is asked something (the next `Exec`, a kill,
//! a release, bash's exit), so it reads the completion then.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;

use shellvisor_process::OutputFifo;

/// A run the I/O task completed with its status record.
#[derive(Debug)]
pub(crate) struct Completed {
    /// The Shell's number of the run ([`crate::io::RunIo::run`]).
    pub(crate) run: u64,
    /// The run's FIFO, when it reached end-of-file (no writer of it is
    /// left anywhere): the next run can reuse it instead of creating one.
    pub(crate) drained_fifo: Option<OutputFifo>,
}

/// The one place a run's completion is left: written by the I/O task before
/// the run's Job hears of the end (so before any next run's `Exec` can
/// reach the Shell), taken by the Shell.
#[derive(Debug, Clone, Default)]
pub(crate) struct Completions(Arc<Mutex<Option<Completed>>>);

impl Completions {
    /// Leaves `completed` for the Shell (replacing one it never took: runs
    /// are one at a time, so that one's run is over and known to be).
    pub(crate) fn put(&self, completed: Completed) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(completed);
    }

    /// Takes the completion left since the last take, if any.
    pub(crate) fn take(&self) -> Option<Completed> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}
