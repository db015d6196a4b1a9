//! The methods: their params and results (with JSON Schemas), and what each
//! does with the library.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::json;
use shellvisor::JobId;
use shellvisor::JobInfo;
use shellvisor::JobPage;
use shellvisor::JobQuery;
use shellvisor::PtyState;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::Screen;
use shellvisor::SessionEvent;
use shellvisor::TerminalSize;

use crate::envelope::INVALID_PARAMS;
use crate::envelope::METHOD_NOT_FOUND;
use crate::envelope::RpcError;
use crate::server::Connection;

/// Default and largest `job.output` read.
const DEFAULT_OUTPUT_BYTES: usize = 64 * 1024;
const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Default wait of `job.wait` and `job.next_completion`.
const DEFAULT_WAIT_MS: u64 = 30_000;

/// `session.open`: open (or find) a session and choose whether this
/// connection receives its notifications.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionOpenParams {
    /// The session's id (any string; sessions are created on first use).
    pub session_id: String,
    /// Send this session's `output`, `job.started`, `job.finished`,
    /// `pty.state` and `lagged` notifications on this connection (default true).
    #[serde(default)]
    pub subscribe: Option<bool>,
    /// Shell text every new shell of the session runs before its first
    /// command (replacing the configured `shell.init`), when this call
    /// creates the session; a failure is reported once, in the first
    /// result's notices and `runtime.info`'s warnings.
    #[serde(default)]
    pub init: Option<String>,
}

/// Params naming a session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionParams {
    /// The session's id.
    pub session_id: String,
}

/// `job.list`: a page of a session's retained jobs, oldest first.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobListParams {
    /// The session's id.
    pub session_id: String,
    /// The most jobs to list (default 100, at most 1000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Where to go on: the `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<u64>,
}

/// `run` and `pty.start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunParams {
    /// The session to run in.
    pub session_id: String,
    /// What to run: `{command, env?, timeout?, cwd?, pty?, async?, cols?,
    /// rows?, auto_background_after?, idle_timeout?, wait_for?}`.
    pub request: RunRequest,
    /// Notifications this connection gets about this run, even when it is
    /// not subscribed to the session: `exit` (`job.finished`), `output`
    /// (`output`) and `ready` (`job.ready`). A subscribed connection gets
    /// them all anyway.
    #[serde(default)]
    pub notify_on: Vec<NotifyOn>,
}

/// A kind of notification about one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NotifyOn {
    /// `job.finished`, when it ends.
    Exit,
    /// `output`, as it prints (coalesced).
    Output,
    /// `job.ready`, when its `wait_for` holds.
    Ready,
}

impl NotifyOn {
    /// Whether `event` is of this kind.
    pub(crate) fn covers(self, event: &SessionEvent) -> bool {
        matches!(
            (self, event),
            (NotifyOn::Exit, SessionEvent::JobFinished { .. })
                | (
                    NotifyOn::Output,
                    SessionEvent::Output { .. } | SessionEvent::OutputSuppressed { .. }
                )
                | (NotifyOn::Ready, SessionEvent::JobReady { .. })
        )
    }
}

/// The job an event is about, if it is about one.
pub(crate) fn event_job(event: &SessionEvent) -> Option<&JobId> {
    match event {
        SessionEvent::Output { job_id, .. }
        | SessionEvent::OutputSuppressed { job_id, .. }
        | SessionEvent::JobStarted { job_id, .. }
        | SessionEvent::JobFinished { job_id, .. }
        | SessionEvent::JobReady { job_id, .. }
        | SessionEvent::PtyState { job_id, .. } => Some(job_id),
        _ => None,
    }
}

/// Params naming one job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobParams {
    /// The session the job belongs to.
    pub session_id: String,
    /// The job.
    pub job_id: JobId,
}

/// `job.output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputParams {
    /// The session the job belongs to.
    pub session_id: String,
    /// The job.
    pub job_id: JobId,
    /// First byte (default 0).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most bytes (default 65536, at most 1048576).
    #[serde(default)]
    pub max_bytes: Option<usize>,
}

/// `job.wait`: give `job_id` or `job_ids`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitParams {
    /// The session the jobs belong to.
    pub session_id: String,
    /// The job.
    #[serde(default)]
    pub job_id: Option<JobId>,
    /// Several jobs: the result of the first to finish.
    #[serde(default)]
    pub job_ids: Option<Vec<JobId>>,
    /// Longest wait in milliseconds (default 30000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `job.next_completion`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NextCompletionParams {
    /// The session.
    pub session_id: String,
    /// Longest wait in milliseconds (default 30000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `pty.write`: give exactly one of `text` and `data_base64`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PtyWriteParams {
    /// The session the job belongs to.
    pub session_id: String,
    /// The terminal job.
    pub job_id: JobId,
    /// Text to type.
    #[serde(default)]
    pub text: Option<String>,
    /// Raw bytes to type, base64.
    #[serde(default)]
    pub data_base64: Option<String>,
}

/// `pty.key`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PtyKeyParams {
    /// The session the job belongs to.
    pub session_id: String,
    /// The terminal job.
    pub job_id: JobId,
    /// `Enter`, `Tab`, `Esc`, `Backspace`, arrows, `C-c`, `C-d`, `C-<x>`, `M-<x>`...
    pub key: String,
}

/// `pty.resize`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PtyResizeParams {
    /// The session the job belongs to.
    pub session_id: String,
    /// The terminal job.
    pub job_id: JobId,
    /// Columns (clamped to 20..=400).
    pub cols: u16,
    /// Rows (clamped to 5..=200).
    pub rows: u16,
}

/// No params.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoParams {}

/// `session.open`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SessionOpened {
    /// The session's id.
    pub session_id: String,
    /// Whether this connection receives its notifications.
    pub subscribed: bool,
}

/// An empty result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Done {}

/// Raw output bytes of a job.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OutputBytes {
    /// Offset of the bytes in the job's output.
    pub offset: u64,
    /// The bytes, base64.
    pub data_base64: String,
    /// Bytes the job has produced so far.
    pub total_bytes: u64,
    /// No more output will arrive.
    pub closed: bool,
}

/// `job.wait` and `job.next_completion`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Waited {
    /// The result, or `null` if the wait ended first.
    pub result: Option<RunResult>,
}

/// `pty.start`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PtyStarted {
    /// The terminal job's id.
    pub job_id: JobId,
}

/// `runtime.info`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RuntimeInfo {
    /// The server's version.
    pub version: String,
    /// Background jobs running in the runtime.
    pub running_jobs: usize,
    /// Process groups and terminal sessions the runtime has alive.
    pub live_process_groups: usize,
    /// How the runtime contains what it starts.
    pub containment: shellvisor::ContainmentReport,
    /// Where output artifacts are written.
    pub artifacts_dir: String,
    /// Whether that directory is memory-backed (tmpfs or ramfs): only when
    /// no temporary directory on a disk was writable, or it was configured so.
    pub artifacts_in_memory: bool,
    /// What went wrong without failing anything: a shell snapshot that was
    /// skipped, a session's init that failed.
    pub warnings: Vec<String>,
}

/// `output` notification.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OutputNote {
    /// The session.
    pub session_id: String,
    /// The job that produced the bytes.
    pub job_id: JobId,
    /// Offset of the bytes in the job's output (contiguous per job; a gap
    /// after `lagged` can be read with `job.output`).
    pub offset: u64,
    /// The bytes, base64 (byte-exact).
    pub data_base64: String,
}

/// `output.suppressed` notification.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OutputSuppressedNote {
    /// The session.
    pub session_id: String,
    /// The job whose output notifications the flood guard left out.
    pub job_id: JobId,
    /// Where the range left out starts (read it with `job.output`).
    pub offset: u64,
    /// How many bytes were left out.
    pub suppressed_bytes: u64,
    /// How many `output` notifications were left out.
    pub suppressed_events: u64,
}

/// `job.started` notification.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobStartedNote {
    /// The session.
    pub session_id: String,
    /// The job.
    pub job_id: JobId,
    /// Its command.
    pub command: String,
}

/// `job.finished` notification.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobFinishedNote {
    /// The session.
    pub session_id: String,
    /// The job.
    pub job_id: JobId,
    /// Its exit status, if it reported one.
    pub exit_code: Option<i32>,
    /// Whether its deadline fired.
    pub timed_out: bool,
}

/// `job.ready` notification.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobReadyNote {
    /// The session.
    pub session_id: String,
    /// The job.
    pub job_id: JobId,
    /// What held (``output matching `re` ``, `port 8000 listening`).
    pub what: String,
}

/// `pty.state` notification.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PtyStateNote {
    /// The session.
    pub session_id: String,
    /// The terminal job.
    pub job_id: JobId,
    /// Its new state.
    pub state: PtyState,
}

/// `lagged` notification.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct LaggedNote {
    /// The session.
    pub session_id: String,
    /// Notifications dropped because this connection read too slowly.
    pub missed: u64,
}

struct MethodSpec {
    name: &'static str,
    summary: &'static str,
    params: SchemaFn,
    result: SchemaFn,
}

fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

/// Every method, in the order the documentation lists them.
const METHODS: &[MethodSpec] = &[
    MethodSpec {
        name: "session.open",
        summary: "Open (or find) a session; subscribe this connection to its notifications.",
        params: schema_of::<SessionOpenParams>,
        result: schema_of::<SessionOpened>,
    },
    MethodSpec {
        name: "session.close",
        summary: "Close a session: kill its shells and jobs.",
        params: schema_of::<SessionParams>,
        result: schema_of::<Done>,
    },
    MethodSpec {
        name: "run",
        summary: "Run a command; answered when it completes or goes to the background.",
        params: schema_of::<RunParams>,
        result: schema_of::<RunOutcome>,
    },
    MethodSpec {
        name: "job.list",
        summary: "A page of a session's retained jobs, oldest first (100 unless `limit` says; `next_cursor` goes on).",
        params: schema_of::<JobListParams>,
        result: schema_of::<JobPage>,
    },
    MethodSpec {
        name: "job.info",
        summary: "One job's state.",
        params: schema_of::<JobParams>,
        result: schema_of::<JobInfo>,
    },
    MethodSpec {
        name: "job.output",
        summary: "A job's raw output by byte offset.",
        params: schema_of::<OutputParams>,
        result: schema_of::<OutputBytes>,
    },
    MethodSpec {
        name: "job.wait",
        summary: "Wait for a job's result (counts as its delivery).",
        params: schema_of::<WaitParams>,
        result: schema_of::<Waited>,
    },
    MethodSpec {
        name: "job.kill",
        summary: "Kill a job's process tree; answered once it has ended.",
        params: schema_of::<JobParams>,
        result: schema_of::<Done>,
    },
    MethodSpec {
        name: "job.next_completion",
        summary: "The next finished background job whose result nobody took.",
        params: schema_of::<NextCompletionParams>,
        result: schema_of::<Waited>,
    },
    MethodSpec {
        name: "pty.start",
        summary: "Start a command on a pseudo-terminal as a background job.",
        params: schema_of::<RunParams>,
        result: schema_of::<PtyStarted>,
    },
    MethodSpec {
        name: "pty.write",
        summary: "Type text or bytes into a terminal job.",
        params: schema_of::<PtyWriteParams>,
        result: schema_of::<Done>,
    },
    MethodSpec {
        name: "pty.key",
        summary: "Press a named key in a terminal job.",
        params: schema_of::<PtyKeyParams>,
        result: schema_of::<Done>,
    },
    MethodSpec {
        name: "pty.resize",
        summary: "Resize a terminal job's terminal.",
        params: schema_of::<PtyResizeParams>,
        result: schema_of::<TerminalSize>,
    },
    MethodSpec {
        name: "pty.screen",
        summary: "A terminal job's rendered screen.",
        params: schema_of::<JobParams>,
        result: schema_of::<Screen>,
    },
    MethodSpec {
        name: "pty.state",
        summary: "A terminal job's state.",
        params: schema_of::<JobParams>,
        result: schema_of::<PtyState>,
    },
    MethodSpec {
        name: "runtime.info",
        summary: "The server's version and live counts.",
        params: schema_of::<NoParams>,
        result: schema_of::<RuntimeInfo>,
    },
];

/// A schema generator.
type SchemaFn = fn() -> Value;

/// Every notification the server sends: name, summary, params.
const NOTIFICATIONS: &[(&str, &str, SchemaFn)] = &[
    (
        "output",
        "Output bytes of a job of a subscribed session.",
        schema_of::<OutputNote>,
    ),
    (
        "output.suppressed",
        "The flood guard left out output notifications of a job (it printed faster than output.stream_max_bytes_per_sec); the range is readable with job.output.",
        schema_of::<OutputSuppressedNote>,
    ),
    (
        "job.started",
        "A job of a subscribed session started.",
        schema_of::<JobStartedNote>,
    ),
    (
        "job.finished",
        "A job of a subscribed session finished.",
        schema_of::<JobFinishedNote>,
    ),
    (
        "job.ready",
        "A job's wait_for held (its output matched, its port listens, its path exists); it goes on.",
        schema_of::<JobReadyNote>,
    ),
    (
        "pty.state",
        "A terminal job changed state (running, awaiting_input, exited).",
        schema_of::<PtyStateNote>,
    ),
    (
        "lagged",
        "Notifications of a session were dropped for this connection.",
        schema_of::<LaggedNote>,
    ),
];

/// The protocol's JSON Schemas: every method's params and result, every
/// notification's params, and the error codes.
pub fn schema() -> Value {
    let methods: serde_json::Map<String, Value> = METHODS
        .iter()
        .map(|m| {
            (
                m.name.to_owned(),
                json!({ "summary": m.summary, "params": (m.params)(), "result": (m.result)() }),
            )
        })
        .collect();
    let notifications: serde_json::Map<String, Value> = NOTIFICATIONS
        .iter()
        .map(|(name, summary, params)| {
            (
                (*name).to_owned(),
                json!({ "summary": summary, "params": params() }),
            )
        })
        .collect();
    json!({
        "protocol": "JSON-RPC 2.0, one JSON object per line",
        "methods": methods,
        "notifications": notifications,
        "errors": {
            "-32700": "parse error: the line is not JSON",
            "-32600": "invalid request (also: a line over the size limit)",
            "-32601": "method not found",
            "-32602": "invalid params",
            "-32603": "internal error",
            "-32000": "runtime error; data.code holds the stable code (job_not_found, invalid_env_name, pty_busy, ...)"
        }
    })
}

fn params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|err| RpcError::new(INVALID_PARAMS, format!("invalid params: {err}")))
}

fn to_value<T: Serialize>(value: T) -> Result<Value, RpcError> {
    serde_json::to_value(value)
        .map_err(|err| RpcError::new(crate::envelope::INTERNAL_ERROR, err.to_string()))
}

fn wait_for(timeout_ms: Option<u64>) -> Duration {
    Duration::from_millis(timeout_ms.unwrap_or(DEFAULT_WAIT_MS))
}

/// Runs one method.
pub(crate) async fn dispatch(
    conn: &Connection,
    method: &str,
    raw: Value,
) -> Result<Value, RpcError> {
    match method {
        "session.open" => {
            let p: SessionOpenParams = params(raw)?;
            let subscribe = p.subscribe.unwrap_or(true);
            let options = shellvisor::SessionOptions { init: p.init };
            let session = conn.session_with(&p.session_id, options).await?;
            if subscribe {
                conn.subscribe(&p.session_id, &session);
            }
            to_value(SessionOpened {
                session_id: p.session_id,
                subscribed: subscribe,
            })
        }
        "session.close" => {
            let p: SessionParams = params(raw)?;
            conn.close_session(&p.session_id).await;
            to_value(Done {})
        }
        "run" => {
            let p: RunParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            // Subscribed before the run starts, so none of its events is missed.
            let watch = (!p.notify_on.is_empty() && !conn.is_subscribed(&p.session_id))
                .then(|| session.subscribe());
            let run = session.start_run(p.request).await?;
            let job_id = run.job_id().clone();
            if let Some(events) = watch {
                conn.notify_run(&p.session_id, events, job_id.clone(), p.notify_on);
            }
            tokio::select! {
                outcome = run.outcome() => to_value(outcome?),
                () = conn.closed() => {
                    // Nobody is left to read the answer: the command goes.
                    session.kill(&job_id).await?;
                    Err(shellvisor::Error::InvalidRequest {
                        message: "the connection closed; the run was killed".to_owned(),
                    }
                    .into())
                }
            }
        }
        "job.list" => {
            let p: JobListParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            to_value(
                session
                    .jobs_page(JobQuery::bounded(p.cursor, p.limit))
                    .await?,
            )
        }
        "job.info" => {
            let p: JobParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            to_value(session.job(&p.job_id).await?)
        }
        "job.output" => {
            let p: OutputParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            let max = p
                .max_bytes
                .unwrap_or(DEFAULT_OUTPUT_BYTES)
                .min(MAX_OUTPUT_BYTES);
            let chunk = session
                .read_output(&p.job_id, p.offset.unwrap_or(0), max)
                .await?;
            to_value(OutputBytes {
                offset: chunk.offset,
                data_base64: BASE64.encode(&chunk.data),
                total_bytes: chunk.total_bytes,
                closed: chunk.closed,
            })
        }
        "job.wait" => {
            let p: WaitParams = params(raw)?;
            let job_ids = match (p.job_id, p.job_ids) {
                (Some(job_id), None) => vec![job_id],
                (None, Some(job_ids)) if !job_ids.is_empty() => job_ids,
                _ => {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        "invalid params: give exactly one of job_id and job_ids (a non-empty list)",
                    ));
                }
            };
            let session = conn.session(&p.session_id).await?;
            let result = session.wait_any(&job_ids, wait_for(p.timeout_ms)).await?;
            to_value(Waited { result })
        }
        "job.kill" => {
            let p: JobParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            session.kill(&p.job_id).await?;
            to_value(Done {})
        }
        "job.next_completion" => {
            let p: NextCompletionParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            let result =
                match tokio::time::timeout(wait_for(p.timeout_ms), session.next_completion()).await
                {
                    Ok(result) => Some(result?),
                    Err(_) => None,
                };
            to_value(Waited { result })
        }
        "pty.start" => {
            let p: RunParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            let watch = (!p.notify_on.is_empty() && !conn.is_subscribed(&p.session_id))
                .then(|| session.subscribe());
            let handle = session.start_pty(p.request).await?;
            if let Some(events) = watch {
                conn.notify_run(&p.session_id, events, handle.job_id().clone(), p.notify_on);
            }
            to_value(PtyStarted {
                job_id: handle.job_id().clone(),
            })
        }
        "pty.write" => {
            let p: PtyWriteParams = params(raw)?;
            let bytes = match (p.text, p.data_base64) {
                (Some(text), None) => text.into_bytes(),
                (None, Some(data)) => BASE64
                    .decode(data)
                    .map_err(|err| RpcError::new(INVALID_PARAMS, format!("data_base64: {err}")))?,
                _ => {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        "give exactly one of text and data_base64",
                    ));
                }
            };
            let session = conn.session(&p.session_id).await?;
            session.pty(&p.job_id).write(bytes).await?;
            to_value(Done {})
        }
        "pty.key" => {
            let p: PtyKeyParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            session.pty(&p.job_id).key(&p.key).await?;
            to_value(Done {})
        }
        "pty.resize" => {
            let p: PtyResizeParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            to_value(session.pty(&p.job_id).resize(p.cols, p.rows).await?)
        }
        "pty.screen" => {
            let p: JobParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            to_value(session.pty(&p.job_id).screen().await?)
        }
        "pty.state" => {
            let p: JobParams = params(raw)?;
            let session = conn.session(&p.session_id).await?;
            to_value(session.pty(&p.job_id).state().await?)
        }
        "runtime.info" => {
            let _: NoParams = params(raw)?;
            to_value(conn.info())
        }
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("method not found: {other}"),
        )),
    }
}

/// The notification (method and params) for a session event, if it has one.
pub(crate) fn event_note(session_id: &str, event: SessionEvent) -> Option<(&'static str, Value)> {
    let session_id = session_id.to_owned();
    let (method, params) = match event {
        SessionEvent::Output {
            job_id,
            offset,
            data,
        } => (
            "output",
            serde_json::to_value(OutputNote {
                session_id,
                job_id,
                offset,
                data_base64: BASE64.encode(&data),
            }),
        ),
        SessionEvent::OutputSuppressed {
            job_id,
            offset,
            bytes,
            events,
        } => (
            "output.suppressed",
            serde_json::to_value(OutputSuppressedNote {
                session_id,
                job_id,
                offset,
                suppressed_bytes: bytes,
                suppressed_events: events,
            }),
        ),
        SessionEvent::JobStarted { job_id, command } => (
            "job.started",
            serde_json::to_value(JobStartedNote {
                session_id,
                job_id,
                command,
            }),
        ),
        SessionEvent::JobFinished {
            job_id,
            exit_code,
            timed_out,
        } => (
            "job.finished",
            serde_json::to_value(JobFinishedNote {
                session_id,
                job_id,
                exit_code,
                timed_out,
            }),
        ),
        SessionEvent::JobReady { job_id, what } => (
            "job.ready",
            serde_json::to_value(JobReadyNote {
                session_id,
                job_id,
                what,
            }),
        ),
        SessionEvent::PtyState { job_id, state } => (
            "pty.state",
            serde_json::to_value(PtyStateNote {
                session_id,
                job_id,
                state,
            }),
        ),
        SessionEvent::Lagged { missed } => (
            "lagged",
            serde_json::to_value(LaggedNote { session_id, missed }),
        ),
        _ => return None,
    };
    params.ok().map(|params| (method, params))
}

pub(crate) fn runtime_info(runtime: &shellvisor::Runtime) -> RuntimeInfo {
    RuntimeInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        running_jobs: runtime.running_jobs(),
        live_process_groups: runtime.live_process_groups(),
        containment: runtime.containment(),
        artifacts_dir: runtime.artifacts_dir().display().to_string(),
        artifacts_in_memory: runtime.artifacts_in_memory(),
        warnings: runtime.warnings(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_method_has_a_schema() {
        let schema = schema();
        for method in METHODS {
            assert!(
                schema["methods"][method.name]["params"].is_object(),
                "{}",
                method.name
            );
            assert!(
                schema["methods"][method.name]["result"].is_object(),
                "{}",
                method.name
            );
        }
        assert_eq!(
            schema["notifications"].as_object().unwrap().len(),
            NOTIFICATIONS.len()
        );
    }
}
