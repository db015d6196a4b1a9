//! The tools' arguments and structured results, and what each tool does with
//! the library. Nothing here knows about MCP's wire types.

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use shellvisor::BackgroundReason;
use shellvisor::JobId;
use shellvisor::JobInfo;
use shellvisor::JobPage;
use shellvisor::JobQuery;
use shellvisor::JobStatus;
use shellvisor::PtyState;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::Screen;
use shellvisor::Session;

/// Longest `job_wait` (seconds), for clients that allow long calls.
pub(crate) const MAX_WAIT_SECS: u64 = 3600;
/// Default `job_wait` (seconds): below the 60 s that hosts commonly allow a call.
pub(crate) const DEFAULT_WAIT_SECS: u64 = 30;
/// Most new output a `job_wait` over several jobs shows per job, in bytes.
pub(crate) const WAIT_NEW_OUTPUT_BYTES: usize = 4096;
/// Default and largest `job_output` read.
pub(crate) const DEFAULT_OUTPUT_BYTES: usize = 64 * 1024;
pub(crate) const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Default and largest settle time after `write_stdin`.
const DEFAULT_SETTLE_MS: u64 = 500;
const MAX_SETTLE_MS: u64 = 30_000;

/// `bash`: run a shell command.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BashArgs {
    /// The shell command (bash). It runs in the session's persistent shell:
    /// `cd` and exported variables carry over to later calls.
    pub command: String,
    /// Shell session to use (default: this connection's session).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Extra environment variables for this call only.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Deadline in seconds (default 300; 0 disables; clamped to 1..3600). A
    /// fraction is rounded up to the next whole second (2.5 is 3).
    #[serde(default, deserialize_with = "whole_seconds")]
    #[schemars(with = "Option<f64>")]
    pub timeout: Option<u64>,
    /// Working directory for this call (it carries over, like `cd`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run on a pseudo-terminal (for programs that need one: REPLs, TUIs,
    /// prompts). Continue it with `write_stdin`; read it with `pty_screen`.
    #[serde(default)]
    pub pty: Option<bool>,
    /// Start as a background job and answer at once with its id.
    #[serde(default, rename = "async")]
    pub run_async: Option<bool>,
    /// Same as `async`.
    #[serde(default)]
    pub run_in_background: Option<bool>,
    /// Terminal width for `pty` (default 120).
    #[serde(default)]
    pub cols: Option<u16>,
    /// Terminal height for `pty` (default 40).
    #[serde(default)]
    pub rows: Option<u16>,
    /// Answer with a job id if the command is still running after this
    /// many seconds (fractions allowed; 0 answers at once as a job; at most
    /// 86400); it goes on in the background: follow it with `job_wait`.
    /// Default: the server's auto-background setting. When `timeout` comes
    /// first, the call waits for the result or the timeout instead.
    #[serde(default)]
    pub auto_background_after: Option<f64>,
    /// End the command when it prints nothing for this many seconds
    /// (fractions allowed; at most 86400; 0 = off): it is killed as on a
    /// timeout, with `[Command produced no output for N seconds]`.
    #[serde(default)]
    pub idle_timeout: Option<f64>,
    /// Answer as soon as the command is ready, while it goes on as a job:
    /// `{"output": "<regex>"}` (a line of output matches), `{"port": 8000}`
    /// (a TCP port listens) or `{"path": "<file>"}` (it exists). For "start
    /// the dev server, tell me when it listens". Until then `timeout` and
    /// auto-background apply as usual.
    #[serde(default)]
    pub wait_for: Option<shellvisor::WaitFor>,
    /// Resource limits for this command: `memory_mb` (1..=1048576; over
    /// it the kernel kills it: `[Killed: memory limit N MiB reached]`),
    /// `pids` (1..=4194304 processes and threads at once), `cpu_percent`
    /// (1..=100000, of one CPU). The command then runs in a subshell: its
    /// `cd` and `export` do not carry over. The result's `limits` says which
    /// were enforced here and which were reached.
    #[serde(default)]
    pub limits: Option<shellvisor::RunLimits>,
}

impl JobWaitArgs {
    /// The jobs to wait for: `job_id` or `job_ids`, exactly one of them.
    pub(crate) fn job_ids(&self) -> shellvisor::Result<Vec<JobId>> {
        let ids: Vec<JobId> = match (&self.job_id, &self.job_ids) {
            (Some(id), None) => vec![JobId::new(id.clone())],
            (None, Some(ids)) if !ids.is_empty() => ids.iter().cloned().map(JobId::new).collect(),
            _ => {
                return Err(shellvisor::Error::InvalidRequest {
                    message: "give exactly one of job_id and job_ids (a non-empty list)".to_owned(),
                });
            }
        };
        Ok(ids)
    }
}

impl BashArgs {
    /// The library request; an `auto_background_after` out of range is
    /// refused with the range.
    pub(crate) fn request(&self) -> shellvisor::Result<RunRequest> {
        let mut request = RunRequest::new(self.command.clone())
            .pty(self.pty.unwrap_or(false))
            .run_async(self.run_async.unwrap_or(false) || self.run_in_background.unwrap_or(false));
        request.env = self.env.clone().unwrap_or_default();
        request.timeout = self.timeout;
        request.cwd = self.cwd.clone();
        request.cols = self.cols;
        request.rows = self.rows;
        let invalid = |message| shellvisor::Error::InvalidRequest { message };
        if let Some(seconds) = self.auto_background_after {
            request.auto_background_after =
                Some(shellvisor::auto_background_from_secs(seconds).map_err(invalid)?);
        }
        if let Some(seconds) = self.idle_timeout {
            request.idle_timeout =
                Some(shellvisor::idle_timeout_from_secs(seconds).map_err(invalid)?);
        }
        request.wait_for = self.wait_for.clone();
        request.limits = self.limits;
        Ok(request)
    }
}

/// Seconds as JSON writes numbers: `10`, `10.0` and `9.5` (rounded up: a
/// deadline is never shorter than asked) are accepted; a negative number
/// is an error.
fn whole_seconds<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    struct Seconds;
    impl serde::de::Visitor<'_> for Seconds {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number of seconds (0 or more)")
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            u64::try_from(v).map(Some).map_err(|_| {
                E::custom(format!(
                    "a number of seconds must not be negative (got {v})"
                ))
            })
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            if v.is_nan() || v < 0.0 {
                return Err(E::custom(format!(
                    "a number of seconds must not be negative (got {v})"
                )));
            }
            // `as` saturates: anything past u64::MAX is clamped later anyway.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Ok(Some(v.ceil() as u64))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    deserializer.deserialize_any(Seconds)
}

/// Arguments naming one job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobArgs {
    /// The job's id (from `bash`).
    pub job_id: String,
    /// Its session (default: this connection's session).
    #[serde(default)]
    pub session_id: Option<String>,
}

/// `job_output`: read a job's raw output by byte offset.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobOutputArgs {
    /// The job's id.
    pub job_id: String,
    /// Its session (default: this connection's session).
    #[serde(default)]
    pub session_id: Option<String>,
    /// First byte to read (default 0).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most bytes to read (default 65536, at most 1048576).
    #[serde(default)]
    pub max_bytes: Option<usize>,
}

/// `job_wait`: wait for a job (or the first of several) to finish.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobWaitArgs {
    /// The job's id (give this or `job_ids`).
    #[serde(default)]
    pub job_id: Option<String>,
    /// Several jobs: the call answers when the first of them finishes, or at
    /// its timeout with each one's state and its output since the last read.
    #[serde(default)]
    pub job_ids: Option<Vec<String>>,
    /// Their session (default: this connection's session).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Longest wait in seconds (default 30, which fits hosts that give a
    /// call 60 s; up to 3600 for clients that allow long calls). A fraction
    /// is rounded up to the next whole second.
    #[serde(default, deserialize_with = "whole_seconds")]
    #[schemars(with = "Option<f64>")]
    pub timeout: Option<u64>,
}

/// `job_list`: a session's jobs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobListArgs {
    /// The session (default: this connection's session).
    #[serde(default)]
    pub session_id: Option<String>,
    /// The most jobs to list (default 100, at most 1000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Where to go on: the `next_cursor` of the previous list.
    #[serde(default)]
    pub cursor: Option<u64>,
}

impl JobListArgs {
    /// The page asked for.
    pub(crate) fn query(&self) -> JobQuery {
        JobQuery::bounded(self.cursor, self.limit)
    }
}

/// `write_stdin`: type into a job's terminal.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteStdinArgs {
    /// The job's id (a `pty` run).
    pub job_id: String,
    /// Its session (default: this connection's session).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Text to type (sent as is; end a line with `keys: ["Enter"]` or `\r`).
    #[serde(default)]
    pub text: Option<String>,
    /// Keys to press after the text: `Enter`, `Tab`, `Esc`, `Backspace`,
    /// `Up`, `Down`, `Left`, `Right`, `C-c`, `C-d`, `C-z`, `C-<x>`, `M-<x>`...
    #[serde(default)]
    pub keys: Option<Vec<String>>,
    /// How long to let the program react before returning its screen, in
    /// milliseconds (default 500; returns early when it waits for input again
    /// or exits).
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// What `bash`, `job_wait` and `job_kill` report.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub(crate) struct RunContent {
    /// `completed` (the result is here), `background` (the job goes on:
    /// follow it with `job_wait`, `job_output`, `write_stdin`), or `running`
    /// (a wait ended before the job did).
    pub status: String,
    /// The job's id.
    pub job_id: String,
    /// The session it runs in.
    pub session_id: String,
    /// Exit status (128+N for signal N), once known.
    pub exit_code: Option<i32>,
    /// The deadline (or the idle timeout) fired and the process tree was killed.
    pub timed_out: bool,
    /// Which fired: `deadline` or `idle`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_reason: Option<String>,
    /// The job was killed on request.
    pub killed: bool,
    /// Part of the output is not in the text (read it with `job_output`).
    pub truncated: bool,
    /// Raw output bytes.
    pub output_bytes: u64,
    /// The file holding the complete output, when it was saved.
    pub artifact_path: Option<String>,
    /// The shell's working directory after the command (for a job still
    /// running, and when the shell ended, the directory it started in).
    pub cwd: Option<String>,
    /// The job's state: `running`, `awaiting_input`, `completed`, `failed`,
    /// `timed_out` or `killed`.
    pub state: String,
    /// Why a job went to the background: `requested`, `timer`,
    /// `awaiting_input` or `ready` (its `wait_for` held).
    pub background_reason: Option<String>,
    /// Wall time in milliseconds.
    pub wall_time_ms: Option<u64>,
    /// A `job_wait` over several jobs that ended before any finished: each
    /// one's state and its output since the last read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<JobProgress>>,
    /// For a command with `limits`: which were enforced (and how), which
    /// could not be here, and which it reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<shellvisor::LimitsReport>,
}

/// One job in a `job_wait` over several that timed out.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobProgress {
    /// The job's id.
    pub job_id: String,
    /// `running`, `awaiting_input`, `completed`, `failed`, `timed_out` or `killed`.
    pub state: String,
    /// Raw output bytes so far.
    pub output_bytes: u64,
    /// Its output since the last read (`job_output`, or an earlier wait), at
    /// most 4096 bytes, as text.
    pub new_output: String,
    /// Where the next read starts.
    pub next_offset: u64,
}

impl RunContent {
    pub(crate) fn from_result(session_id: &str, result: &RunResult) -> Self {
        Self {
            status: "completed".to_owned(),
            job_id: result.job_id.to_string(),
            session_id: session_id.to_owned(),
            exit_code: result.exit_code,
            timed_out: result.timed_out,
            timeout_reason: result
                .timeout_reason
                .map(|reason| reason.as_str().to_owned()),
            killed: result.killed,
            truncated: result.truncation.truncated,
            output_bytes: result.truncation.total_bytes,
            artifact_path: result.truncation.artifact.as_ref().map(|a| a.path.clone()),
            cwd: result.cwd.clone(),
            state: finished_state(result).to_owned(),
            background_reason: None,
            wall_time_ms: Some(result.wall_time_ms),
            jobs: None,
            limits: result.limits.as_deref().cloned(),
        }
    }

    pub(crate) fn from_outcome(session_id: &str, outcome: &RunOutcome) -> (Self, String, bool) {
        match outcome {
            RunOutcome::Completed(result) => (
                Self::from_result(session_id, result),
                result.text.clone(),
                result.is_error,
            ),
            RunOutcome::Backgrounded(job) => {
                let state = match job.reason {
                    BackgroundReason::AwaitingInput => "awaiting_input",
                    _ => "running",
                };
                let reason = Some(job.reason.as_str().to_owned());
                let text = job.text.clone();
                (
                    Self {
                        status: "background".to_owned(),
                        job_id: job.job_id.to_string(),
                        session_id: session_id.to_owned(),
                        output_bytes: job.output_bytes,
                        cwd: Some(job.cwd.clone()),
                        state: state.to_owned(),
                        background_reason: reason,
                        ..Self::default()
                    },
                    text,
                    false,
                )
            }
            _ => (Self::default(), String::new(), true),
        }
    }

    pub(crate) fn running(session_id: &str, info: &JobInfo) -> (Self, String) {
        let state = job_state(info);
        let report = Self {
            status: "running".to_owned(),
            job_id: info.job_id.to_string(),
            session_id: session_id.to_owned(),
            output_bytes: info.output_bytes,
            state: state.to_owned(),
            wall_time_ms: Some(info.wall_time_ms),
            ..Self::default()
        };
        let text = format!(
            "Job {} is still {} after {:.1} s ({} bytes of output so far): {}",
            info.job_id,
            state.replace('_', " "),
            info.wall_time_ms as f64 / 1000.0,
            info.output_bytes,
            info.label
        );
        (report, text)
    }
}

fn finished_state(result: &RunResult) -> &'static str {
    if result.timed_out {
        "timed_out"
    } else if result.killed {
        "killed"
    } else if result.exit_code == Some(0) {
        "completed"
    } else {
        "failed"
    }
}

pub(crate) fn job_state(info: &JobInfo) -> &'static str {
    match (info.state, info.pty_state) {
        (JobStatus::Running, Some(PtyState::AwaitingInput)) => "awaiting_input",
        (JobStatus::Running, _) => "running",
        (JobStatus::Completed, _) => "completed",
        (JobStatus::TimedOut, _) => "timed_out",
        (JobStatus::Killed, _) => "killed",
        _ => "failed",
    }
}

/// What `job_output` reports.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OutputContent {
    /// The job's id.
    pub job_id: String,
    /// Offset of the bytes returned.
    pub offset: u64,
    /// How many bytes were returned.
    pub bytes: u64,
    /// Where the next read starts.
    pub next_offset: u64,
    /// Bytes the job has produced so far.
    pub total_bytes: u64,
    /// No more output will arrive.
    pub closed: bool,
}

/// One job in `job_list`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobEntry {
    /// The job's id.
    pub job_id: String,
    /// The command, cut to 120 characters.
    pub label: String,
    /// `running`, `awaiting_input`, `completed`, `failed`, `timed_out` or `killed`.
    pub state: String,
    /// Whether it is (or was) a background job.
    pub background: bool,
    /// Exit status, once known.
    pub exit_code: Option<i32>,
    /// Raw output bytes so far.
    pub output_bytes: u64,
    /// Wall time so far, in milliseconds.
    pub wall_time_ms: u64,
}

/// `session_close`: end a session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionCloseArgs {
    /// The session (default: this connection's session).
    #[serde(default)]
    pub session_id: Option<String>,
}

/// What `session_close` reports.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SessionClosed {
    /// The session that was closed (a later call with it starts afresh).
    pub session_id: String,
}

impl SessionClosed {
    pub(crate) fn new(session_id: String) -> (Self, String, bool) {
        let text = format!(
            "Session {session_id} closed: its shell and everything it started have ended. A later call with this \
             session_id starts a fresh shell."
        );
        (Self { session_id }, text, false)
    }
}

/// What `job_list` reports.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobList {
    /// The session.
    pub session_id: String,
    /// Its retained jobs, oldest first (one page of them).
    pub jobs: Vec<JobEntry>,
    /// How many jobs the session retains in all.
    pub retained: usize,
    /// Pass as `cursor` to list the jobs after these, when there are more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<u64>,
}

impl JobList {
    pub(crate) fn new(session_id: &str, page: &JobPage) -> (Self, String) {
        let jobs: Vec<JobEntry> = page
            .jobs
            .iter()
            .map(|info| JobEntry {
                job_id: info.job_id.to_string(),
                label: info.label.clone(),
                state: job_state(info).to_owned(),
                background: info.background,
                exit_code: info.exit_code,
                output_bytes: info.output_bytes,
                wall_time_ms: info.wall_time_ms,
            })
            .collect();
        let text = if jobs.is_empty() {
            "No jobs.".to_owned()
        } else {
            jobs.iter()
                .map(|job| {
                    let exit = job
                        .exit_code
                        .map_or(String::new(), |code| format!(" (exit {code})"));
                    format!("{} {}{exit}: {}", job.job_id, job.state, job.label)
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let text = match page.next_cursor {
            Some(cursor) => format!(
                "{text}\n{} of {} jobs listed; call job_list with cursor={cursor} for the rest.",
                jobs.len(),
                page.retained
            ),
            None => text,
        };
        (
            Self {
                session_id: session_id.to_owned(),
                jobs,
                retained: page.retained,
                next_cursor: page.next_cursor,
            },
            text,
        )
    }
}

/// What `write_stdin` and `pty_screen` report.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ScreenContent {
    /// The job's id.
    pub job_id: String,
    /// `running`, `awaiting_input` or `exited`.
    pub state: String,
    /// Exit status once exited.
    pub exit_code: Option<i32>,
    /// The visible screen, as text.
    pub screen: String,
    /// Cursor row (0-based).
    pub cursor_row: u16,
    /// Cursor column (0-based).
    pub cursor_col: u16,
}

impl ScreenContent {
    pub(crate) fn new(job_id: &JobId, state: PtyState, screen: &Screen) -> (Self, String) {
        let exit_code = match state {
            PtyState::Exited { code } => code,
            _ => None,
        };
        let text = screen.text();
        let status = match state {
            PtyState::Exited { code } => format!(
                "[exited with status {}]",
                code.map_or("unknown".to_owned(), |c| c.to_string())
            ),
            other => format!("[{}]", other.as_str().replace('_', " ")),
        };
        (
            Self {
                job_id: job_id.to_string(),
                state: state.as_str().to_owned(),
                exit_code,
                screen: text.clone(),
                cursor_row: screen.cursor_row,
                cursor_col: screen.cursor_col,
            },
            format!("{text}\n\n{status}"),
        )
    }
}

/// Clamps a `job_wait` timeout.
pub(crate) fn wait_timeout(seconds: Option<u64>) -> Duration {
    Duration::from_secs(seconds.unwrap_or(DEFAULT_WAIT_SECS).min(MAX_WAIT_SECS))
}

/// Types text and keys into a job's terminal, then lets the program react
/// for up to `wait_ms` (less if it waits for input again or exits).
pub(crate) async fn write_and_settle(
    session: &Session,
    args: &WriteStdinArgs,
) -> shellvisor::Result<(PtyState, Screen)> {
    let job_id = JobId::new(args.job_id.clone());
    let term = session.pty(&job_id);
    // Every key is checked before anything is typed: a bad name loses nothing.
    for key in args.keys.iter().flatten() {
        shellvisor::key_bytes(key, false)?;
    }
    if let Some(text) = &args.text {
        term.write(text).await?;
    }
    for key in args.keys.iter().flatten() {
        term.key(key).await?;
    }
    let settle =
        Duration::from_millis(args.wait_ms.unwrap_or(DEFAULT_SETTLE_MS).min(MAX_SETTLE_MS));
    let deadline = shellvisor::deadline_after(settle);
    // Give the program a moment to leave its input wait before checking.
    tokio::time::sleep(settle.min(Duration::from_millis(100))).await;
    loop {
        let state = term.state().await?;
        let now = Instant::now();
        if matches!(state, PtyState::Exited { .. } | PtyState::AwaitingInput) || now >= deadline {
            let screen = term.screen().await?;
            return Ok((state, screen));
        }
        tokio::time::sleep((deadline - now).min(Duration::from_millis(50))).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn timeout(value: serde_json::Value) -> Result<Option<u64>, String> {
        serde_json::from_value::<BashArgs>(serde_json::json!({"command": "true", "timeout": value}))
            .map(|args| args.timeout)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn timeouts_are_whole_seconds_and_fractions_round_up() {
        assert_eq!(timeout(serde_json::json!(10)), Ok(Some(10)));
        assert_eq!(timeout(serde_json::json!(10.0)), Ok(Some(10)));
        assert_eq!(timeout(serde_json::json!(2.5)), Ok(Some(3)));
        assert_eq!(timeout(serde_json::json!(0.1)), Ok(Some(1)));
        assert_eq!(timeout(serde_json::json!(0)), Ok(Some(0)));
        assert_eq!(timeout(serde_json::json!(null)), Ok(None));
        assert_eq!(timeout(serde_json::json!(1e300)), Ok(Some(u64::MAX)));
        let negative = timeout(serde_json::json!(-1)).unwrap_err();
        assert!(negative.contains("must not be negative"), "{negative}");
        assert!(timeout(serde_json::json!("10")).is_err());
        let absent: BashArgs =
            serde_json::from_value(serde_json::json!({"command": "true"})).unwrap();
        assert_eq!(absent.timeout, None);
    }
}
