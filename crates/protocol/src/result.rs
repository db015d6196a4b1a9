//! What the runtime answers.

use serde::Deserialize;
use serde::Serialize;

use crate::JobId;

/// The answer to a run request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunOutcome {
    /// The command finished (or timed out) while the caller waited.
    Completed(RunResult),
}

impl RunOutcome {
    /// The completed result, if the run finished while the caller waited.
    pub fn completed(self) -> Option<RunResult> {
        match self {
            RunOutcome::Completed(result) => Some(result),
        }
    }
}

/// A finished run: its exit status, output and the model-facing text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The run's job id (also its artifact id).
    pub job_id: JobId,
    /// Exit status; a command killed by signal N reports 128+N. `None` when the
    /// run was stopped by its deadline before it could report one.
    pub exit_code: Option<i32>,
    /// The deadline fired and the run's process tree was killed.
    pub timed_out: bool,
    /// The shell's working directory when the command finished, if known.
    pub cwd: Option<String>,
    /// Wall-clock duration of the run in milliseconds.
    pub wall_time_ms: u64,
    /// The rendered output body (sanitized, head + elision marker + tail).
    pub output: String,
    /// Sizes of the raw output and what was shown of it.
    pub truncation: Truncation,
    /// Notices for the reader (timeout clamping, shell restarts, spill failures).
    pub notices: Vec<String>,
    /// The effective deadline.
    pub timeout: TimeoutInfo,
    /// The shell ended during this run (`exit`, `exec`, a signal, or a timeout);
    /// the session has a fresh shell with the last known cwd and exported variables.
    pub shell_restarted: bool,
    /// The complete model-facing text, shaped as the reference tool shapes it.
    pub text: String,
    /// Whether a tool result built from this should be flagged as an error
    /// (non-zero exit or timeout).
    pub is_error: bool,
}

/// Sizes of a run's raw output and of what the rendered text shows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Whether part of the output is not shown in `output`.
    pub truncated: bool,
    /// Raw bytes the command produced (up to its completion).
    pub total_bytes: u64,
    /// Newline-terminated lines in the raw output (a final partial line counts).
    pub total_lines: u64,
    /// Raw bytes represented in the shown text.
    pub shown_bytes: u64,
    /// Lines represented in the shown text.
    pub shown_lines: u64,
    /// The byte offset in the raw stream where the tail shown starts (equal to
    /// `total_bytes` when nothing is elided).
    pub tail_offset: u64,
    /// The artifact holding the full raw bytes, when output outgrew memory.
    pub artifact: Option<ArtifactRef>,
    /// Why writing the artifact failed, if it did; head and tail are still exact.
    pub spill_error: Option<String>,
}

/// A file holding a run's complete raw output, byte-exact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    /// Artifact id, addressable as `artifact://<id>`.
    pub id: String,
    /// Absolute path of the file (mode 0600, in a 0700 directory).
    pub path: String,
}

/// The deadline a run was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeoutInfo {
    /// Effective deadline in seconds; `None` when disabled (`timeout: 0`).
    pub effective_secs: Option<u64>,
    /// What the caller asked for, when it differs from the effective value.
    pub requested_secs: Option<u64>,
}
