//! Events a session publishes to its subscribers.

use bytes::Bytes;

use crate::JobId;

/// Something that happened in a session, delivered to subscribers in order.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A run started.
    JobStarted {
        /// The run's id.
        job_id: JobId,
        /// The command text (as submitted, after validation).
        command: String,
    },
    /// Raw output bytes of a run, coalesced (by default every 50 ms).
    Output {
        /// The run that produced them.
        job_id: JobId,
        /// Byte offset of `data` in the run's raw output stream.
        offset: u64,
        /// Raw bytes, byte-exact (stdout and stderr merged in arrival order).
        data: Bytes,
    },
    /// The flood guard left out streamed output of a run (it printed faster
    /// than `output.stream_max_bytes_per_sec`): `[offset, offset + bytes)`,
    /// in `events` events, is readable by offset from the job. Sent when
    /// streaming resumes or the output ends, before the next `Output`.
    OutputSuppressed {
        /// The run.
        job_id: JobId,
        /// Where the range left out starts.
        offset: u64,
        /// How many bytes were left out.
        bytes: u64,
        /// How many events were left out.
        events: u64,
    },
    /// A run finished.
    JobFinished {
        /// The run's id.
        job_id: JobId,
        /// Its exit code, if it reported one.
        exit_code: Option<i32>,
        /// Whether its deadline fired.
        timed_out: bool,
    },
    /// A run's `wait_for` held: its output matched, its port listens, or
    /// its path exists. Sent once per run; the run goes on.
    JobReady {
        /// The run's id.
        job_id: JobId,
        /// What held, as a notice names it (``output matching `re` ``).
        what: String,
    },
    /// A run on a pseudo-terminal changed state (for example its program now
    /// waits for input).
    PtyState {
        /// The run's id.
        job_id: JobId,
        /// Its new state.
        state: crate::PtyState,
    },
    /// This subscriber fell behind and `missed` events were dropped for it.
    /// Output can be re-read by offset from the job.
    Lagged {
        /// How many events were skipped.
        missed: u64,
    },
}

/// Raw output of a job, read by byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputChunk {
    /// Offset of `data` in the job's raw output.
    pub offset: u64,
    /// The bytes (empty at or past the end).
    pub data: Bytes,
    /// Bytes the job has produced so far.
    pub total_bytes: u64,
    /// Whether the output has ended (no more bytes will arrive).
    pub closed: bool,
}
