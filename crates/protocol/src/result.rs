//! What the runtime answers.

use serde::Deserialize;
use serde::Serialize;

use crate::JobId;

/// The answer to a run request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunOutcome {
    /// The command finished (or timed out) while the caller waited.
    Completed(RunResult),
    /// The run goes on as a background job: it was asked for (`async`), or it
    /// outlived the auto-background timer. Its result is delivered once, by the
    /// session's completion stream or a wait.
    Backgrounded(BackgroundedRun),
}

impl RunOutcome {
    /// The completed result, if the run finished while the caller waited.
    pub fn completed(self) -> Option<RunResult> {
        match self {
            RunOutcome::Completed(result) => Some(result),
            RunOutcome::Backgrounded(_) => None,
        }
    }

    /// The background job, if the run went on in the background.
    pub fn backgrounded(self) -> Option<BackgroundedRun> {
        match self {
            RunOutcome::Backgrounded(job) => Some(job),
            RunOutcome::Completed(_) => None,
        }
    }

    /// The model-facing text of either outcome.
    pub fn text(&self) -> &str {
        match self {
            RunOutcome::Completed(result) => &result.text,
            RunOutcome::Backgrounded(job) => &job.text,
        }
    }
}

/// A run that goes on in the background.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BackgroundedRun {
    /// The job's id.
    pub job_id: JobId,
    /// A short label: the command, cut to 120 characters.
    pub label: String,
    /// Why it is in the background.
    pub reason: BackgroundReason,
    /// The output so far, rendered (empty for an explicit async start).
    pub preview: String,
    /// Raw bytes of output so far (what `preview` ends with).
    pub output_bytes: u64,
    /// The directory the run started in.
    pub cwd: String,
    /// The job's deadline.
    pub timeout: TimeoutInfo,
    /// The model-facing text: preview, notices, then
    /// `Background job <id> started: <label>` and how the result arrives.
    pub text: String,
}

/// Why a run is in the background.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BackgroundReason {
    /// The caller asked for it (`async: true`).
    Requested,
    /// It outlived the auto-background timer.
    Timer,
    /// It runs on a pseudo-terminal and its program waits for input: the
    /// caller is answered with the screen so it can send some.
    AwaitingInput,
    /// Its `wait_for` held (its output matched, its port listens, its path
    /// exists): the caller is answered, the job goes on.
    Ready,
}

impl BackgroundReason {
    /// The wire name: `requested`, `timer`, `awaiting_input` or `ready`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackgroundReason::Requested => "requested",
            BackgroundReason::Timer => "timer",
            BackgroundReason::AwaitingInput => "awaiting_input",
            BackgroundReason::Ready => "ready",
        }
    }
}

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JobStatus {
    /// Still running.
    Running,
    /// Exited with status 0.
    Completed,
    /// Exited with a non-zero status, or its shell was lost.
    Failed,
    /// Its deadline fired.
    TimedOut,
    /// It was killed on request.
    Killed,
}

/// What is known about a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobInfo {
    /// The job's id.
    pub job_id: JobId,
    /// A short label: the command, cut to 120 characters.
    pub label: String,
    /// Where it stands.
    pub state: JobStatus,
    /// Whether it is (or was) a background job.
    pub background: bool,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// How long it ran (so far), in milliseconds.
    pub wall_time_ms: u64,
    /// Its exit code, once known.
    pub exit_code: Option<i32>,
    /// Raw output bytes so far.
    pub output_bytes: u64,
    /// For a run on a pseudo-terminal: running, awaiting input, or exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty_state: Option<crate::PtyState>,
}

/// Which part of a session's retained jobs to list: oldest start first, at
/// most `limit`, starting after `cursor` (the `next_cursor` of the page
/// before; none for the first page). A listing costs what its page holds,
/// not what the session retains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobQuery {
    /// Where the page starts: after the job this cursor names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// The most jobs on the page.
    pub limit: usize,
}

impl JobQuery {
    /// Jobs on a page unless the caller asks for another number.
    pub const DEFAULT_LIMIT: usize = 100;
    /// The most jobs on a page a server's client may ask for.
    pub const MAX_LIMIT: usize = 1000;

    /// The page a server's client asked for: `limit` (default
    /// [`Self::DEFAULT_LIMIT`]) kept within 1 to [`Self::MAX_LIMIT`].
    pub fn bounded(cursor: Option<u64>, limit: Option<usize>) -> Self {
        Self {
            cursor,
            limit: limit
                .unwrap_or(Self::DEFAULT_LIMIT)
                .clamp(1, Self::MAX_LIMIT),
        }
    }

    /// The first page of `limit` jobs.
    pub fn first(limit: usize) -> Self {
        Self {
            cursor: None,
            limit,
        }
    }
}

impl Default for JobQuery {
    fn default() -> Self {
        Self::first(Self::DEFAULT_LIMIT)
    }
}

/// One page of a session's retained jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobPage {
    /// The page's jobs, oldest start first.
    pub jobs: Vec<JobInfo>,
    /// How many jobs the session retains in all.
    pub retained: usize,
    /// The cursor of the next page, when there are more jobs after this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<u64>,
}

/// A finished run: its exit status, output and the model-facing text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunResult {
    /// The run's job id (also its artifact id).
    pub job_id: JobId,
    /// Exit status; a command killed by signal N reports 128+N. `None` when the
    /// run was stopped by its deadline before it could report one.
    pub exit_code: Option<i32>,
    /// The deadline (or the idle timeout) fired and the run's process tree
    /// was killed; `timeout_reason` says which.
    pub timed_out: bool,
    /// Which limit fired, when `timed_out` is set (and only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_reason: Option<TimeoutReason>,
    /// The run was killed on request (a job kill or a cancelled call).
    pub killed: bool,
    /// The shell's working directory when the command finished; when the
    /// shell reported none (it exited or was killed, or the run was on a
    /// terminal), the directory the run started in. `None` only when a
    /// completed run's shell had `PWD` unset.
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
    /// (non-zero exit, timeout or kill).
    pub is_error: bool,
    /// For a run on a pseudo-terminal: the final screen, as rendered by the
    /// terminal emulator (what a human would have seen last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<crate::Screen>,
    /// For a run with `limits`: which were enforced, which could not be,
    /// and which the run reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Box<LimitsReport>>,
}

/// What became of a run's `limits`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LimitsReport {
    /// The limits in force, and how (`memory_mb (cgroup v1)`,
    /// `memory_mb (RLIMIT_AS)`, `pids (cgroup v2)`, ...).
    pub enforced: Vec<String>,
    /// The limits asked for that could not be enforced here, and why.
    pub not_enforced: Vec<String>,
    /// The limits the run reached (`memory_mb`: the kernel killed it;
    /// `pids`: a fork failed).
    pub reached: Vec<String>,
}

/// Which limit ended a run that timed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimeoutReason {
    /// Its deadline (`timeout`).
    Deadline,
    /// It printed nothing for its `idle_timeout`.
    Idle,
}

impl TimeoutReason {
    /// The wire name: `deadline` or `idle`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutReason::Deadline => "deadline",
            TimeoutReason::Idle => "idle",
        }
    }
}

/// Sizes of a run's raw output and of what the rendered text shows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// The output minimizer's filter, when `output` is its text of the raw
    /// output (which is then in the artifact, byte-exact); the shown sizes
    /// are the minimized text's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimizer: Option<String>,
}

/// A file holding a run's complete raw output, byte-exact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArtifactRef {
    /// Artifact id, addressable as `artifact://<id>`.
    pub id: String,
    /// Absolute path of the file (mode 0600, in a 0700 directory).
    pub path: String,
}

/// The deadline a run was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimeoutInfo {
    /// Effective deadline in seconds; `None` when disabled (`timeout: 0`).
    pub effective_secs: Option<u64>,
    /// What the caller asked for, when it differs from the effective value.
    pub requested_secs: Option<u64>,
}

/// Which containment layer is in effect (the strongest one set up).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ContainmentLayer {
    /// A cgroup v2 leaf per session, killed by the reaper if the runtime dies:
    /// catches `setsid` escapes and double-forked daemons.
    Cgroup,
    /// No cgroup can be written (an unprivileged user): each session lives
    /// in a user + PID + mount namespace whose init, a process of the
    /// runtime's, exits when the runtime does, and the kernel then kills
    /// every process in it, `setsid` escapes and double forks included.
    PidNamespace,
    /// Neither cgroups nor namespaces: the reaper kills the recorded process
    /// groups and terminal sessions if the runtime dies (a `setsid` escape
    /// is not caught).
    Reaper,
    /// Process groups and the death signal only: after a SIGKILL of the
    /// runtime, the shells die but their `&` children survive.
    ProcessGroups,
}

impl ContainmentLayer {
    /// The layer's wire name: `cgroup`, `pid_namespace`, `reaper` or
    /// `process_groups`.
    pub fn as_str(self) -> &'static str {
        match self {
            ContainmentLayer::Cgroup => "cgroup",
            ContainmentLayer::PidNamespace => "pid_namespace",
            ContainmentLayer::Reaper => "reaper",
            ContainmentLayer::ProcessGroups => "process_groups",
        }
    }
}

/// How the runtime contains the processes it starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ContainmentReport {
    /// The strongest layer in effect.
    pub layer: ContainmentLayer,
    /// The runtime's cgroup directory, with the cgroup layer.
    pub cgroup: Option<String>,
    /// Each session's `pids.max`, where a pids controller is available.
    pub pids_max_per_session: Option<u64>,
    /// Cgroups of dead runtimes removed when this one started.
    pub swept: usize,
}
