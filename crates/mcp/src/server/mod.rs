//! The rmcp adapter: the only module that sees MCP's wire types.

mod http;
mod subscriptions;
mod tasks;
mod transport;

pub use http::HTTP_PATH;
pub use http::HttpOptions;
pub use http::serve_http;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use dashmap::DashMap;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::ServerHandler;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::model::CallToolResponse;
use rmcp::model::CallToolResult;
use rmcp::model::CancelTaskParams;
use rmcp::model::ContentBlock;
use rmcp::model::GetTaskParams;
use rmcp::model::GetTaskResult;
use rmcp::model::Implementation;
use rmcp::model::ListResourceTemplatesResult;
use rmcp::model::ListResourcesResult;
use rmcp::model::ListToolsResult;
use rmcp::model::PaginatedRequestParams;
use rmcp::model::ProgressNotificationParam;
use rmcp::model::ProgressToken;
use rmcp::model::ReadResourceRequestParams;
use rmcp::model::ReadResourceResponse;
use rmcp::model::ReadResourceResult;
use rmcp::model::Resource;
use rmcp::model::ResourceContents;
use rmcp::model::ResourceTemplate;
use rmcp::model::ServerCapabilities;
use rmcp::model::ServerConfig;
use rmcp::model::SubscribeRequestParams;
use rmcp::model::Tool;
use rmcp::model::UnsubscribeRequestParams;
use rmcp::service::RequestContext;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use shellvisor::BackgroundReason;
use shellvisor::JobId;
use shellvisor::JobQuery;
use shellvisor::JobStatus;
use shellvisor::RunOutcome;
use shellvisor::RunResult;
use shellvisor::Runtime;
use shellvisor::Session;
use shellvisor::SessionEvent;

use crate::resources::ResourceUri;
use crate::resources::read_artifact;
use crate::resources::read_job;
use crate::tools::BashArgs;
use crate::tools::DEFAULT_OUTPUT_BYTES;
use crate::tools::JobArgs;
use crate::tools::JobList;
use crate::tools::JobListArgs;
use crate::tools::JobOutputArgs;
use crate::tools::JobProgress;
use crate::tools::JobWaitArgs;
use crate::tools::MAX_OUTPUT_BYTES;
use crate::tools::OutputContent;
use crate::tools::RunContent;
use crate::tools::ScreenContent;
use crate::tools::SessionCloseArgs;
use crate::tools::SessionClosed;
use crate::tools::WAIT_NEW_OUTPUT_BYTES;
use crate::tools::WriteStdinArgs;
use crate::tools::job_state;
use crate::tools::wait_timeout;
use crate::tools::write_and_settle;

/// Jobs whose read offset (or session) one connection remembers.
const MAX_READ_OFFSETS: usize = 10_000;
/// How often a running `bash` call reports progress (when asked to).
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// How much of the output's end a progress message may show.
const PROGRESS_TAIL_BYTES: usize = 200;

/// How the MCP server behaves.
#[derive(Clone, Debug)]
pub struct McpOptions {
    /// The session used when a call names none.
    pub default_session: String,
}

/// The server for one MCP connection.
#[derive(Clone, Debug)]
struct ShellServer {
    runtime: Runtime,
    options: Arc<McpOptions>,
    /// Where this connection last stopped reading each job's output (by
    /// session and job), for the new output a `job_wait` shows.
    read_offsets: Arc<DashMap<(String, String), u64>>,
    /// The session of each job this connection started (an `artifact://`
    /// URI names only the job).
    job_sessions: Arc<DashMap<String, String>>,
    /// Its `job://` subscriptions.
    subscriptions: Arc<subscriptions::Subscriptions>,
    /// Set for an HTTP client's own default session: closed when the last
    /// clone of this server (the MCP session) is dropped. Held, never read.
    _owned_session: Option<Arc<OwnedSession>>,
}

/// A default shell session that belongs to one MCP client session: it ends
/// with it (the client's `DELETE`, or rmcp's keep-alive expiry), not at the
/// idle limit.
#[derive(Debug)]
struct OwnedSession {
    runtime: Runtime,
    id: String,
}

impl Drop for OwnedSession {
    fn drop(&mut self) {
        let runtime = self.runtime.clone();
        let id = std::mem::take(&mut self.id);
        // Dropped on a runtime thread (rmcp's session task); a runtime that is
        // gone has closed everything already.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { runtime.close_session(id.as_str()).await });
        }
    }
}

/// Serves MCP on stdin/stdout until the client closes the connection, then
/// shuts `runtime` down. stdin and stdout are driven by the reactor where
/// they are pipes or sockets ([`shellvisor_jsonrpc::stdio()`]).
///
/// # Errors
/// When the connection cannot be set up or fails.
pub async fn serve_stdio(runtime: Runtime, options: McpOptions) -> std::io::Result<()> {
    serve(runtime, options, shellvisor_jsonrpc::stdio()).await
}

/// Serves MCP on any byte stream pair (stdio, a socket, an in-memory pipe)
/// until it closes, then shuts `runtime` down.
///
/// # Errors
/// When the connection cannot be set up or fails.
pub async fn serve<R, W>(runtime: Runtime, options: McpOptions, io: (R, W)) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let server = ShellServer::new(runtime.clone(), options);
    let transport = transport::LineTransport::new(io.0, io.1);
    let served = match server.serve(transport).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|err| std::io::Error::other(err.to_string())),
        Err(err) => Err(std::io::Error::other(err.to_string())),
    };
    runtime.shutdown().await;
    served
}

/// The tool list as JSON (name, description, input and output schemas), as
/// `tools/list` returns it.
pub fn tool_definitions() -> serde_json::Value {
    serde_json::to_value(tools()).unwrap_or(serde_json::Value::Null)
}

fn tool<A: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    description: &'static str,
) -> Tool {
    Tool::new(
        name,
        description,
        rmcp::handler::server::tool::schema_for_type::<A>(),
    )
    .with_output_schema::<O>()
}

fn tools() -> Vec<Tool> {
    vec![
        tool::<BashArgs, RunContent>(
            "bash",
            "Run a bash command in a persistent shell session (cwd and exported variables carry over between calls). \
             Long runs are answered early as background jobs (status `background`): follow them with job_wait, job_output \
             and job_kill. With `pty: true` the command runs on a terminal; if it waits for input the call answers with the \
             screen (state `awaiting_input`): continue with write_stdin.",
        ),
        tool::<JobOutputArgs, OutputContent>(
            "job_output",
            "Read a job's raw output by byte offset (the complete output, also when the bash result was truncated).",
        ),
        tool::<JobWaitArgs, RunContent>(
            "job_wait",
            "Wait up to `timeout` seconds (default 30; up to 3600 where the client allows long calls) for a background job \
             to finish and return its result. With `job_ids`, answer when the first of several finishes, or at the timeout \
             with each one's state and new output.",
        ),
        tool::<JobArgs, RunContent>(
            "job_kill",
            "Kill a job's whole process tree (SIGTERM, then SIGKILL) and return its result.",
        ),
        tool::<JobListArgs, JobList>(
            "job_list",
            "List a session's jobs, running and recently finished, oldest first (100 at a time; pass next_cursor as cursor for more).",
        ),
        tool::<WriteStdinArgs, ScreenContent>(
            "write_stdin",
            "Type text and/or press keys in a terminal job (a `pty: true` run), then return its screen once it waits for \
             input again, exits, or `wait_ms` passes.",
        ),
        tool::<JobArgs, ScreenContent>(
            "pty_screen",
            "The current screen of a terminal job, as a human would see it, with its state.",
        ),
        tool::<SessionCloseArgs, SessionClosed>(
            "session_close",
            "End a shell session when you are done with it: its shell and everything it started (background jobs, \
             `server &`) end. Idle sessions are also closed after a while (see the server's configuration).",
        ),
    ]
}

impl ShellServer {
    fn new(runtime: Runtime, options: McpOptions) -> Self {
        Self {
            runtime,
            options: Arc::new(options),
            read_offsets: Arc::default(),
            job_sessions: Arc::default(),
            subscriptions: Arc::default(),
            _owned_session: None,
        }
    }

    /// A server whose default session is its own: closed when it is dropped.
    fn owning_its_session(runtime: Runtime, options: McpOptions) -> Self {
        let owned = OwnedSession {
            runtime: runtime.clone(),
            id: options.default_session.clone(),
        };
        Self {
            _owned_session: Some(Arc::new(owned)),
            ..Self::new(runtime, options)
        }
    }

    async fn session(&self, id: Option<&str>) -> shellvisor::Result<(Session, String)> {
        let id = id.unwrap_or(&self.options.default_session).to_owned();
        Ok((self.runtime.session(id.as_str()).await?, id))
    }

    /// Notes the session of a job this connection started. Bounded like the
    /// read offsets (past the bound an `artifact://` URI of an older job
    /// resolves in the default session only).
    fn remember_job(&self, job_id: &JobId, session_id: &str) {
        if self.job_sessions.len() >= MAX_READ_OFFSETS {
            self.job_sessions.clear();
        }
        self.job_sessions
            .insert(job_id.to_string(), session_id.to_owned());
    }

    /// A bash outcome as a tool result, its job remembered and its saved
    /// output linked as a resource.
    fn run_result(&self, session_id: &str, outcome: &RunOutcome) -> CallToolResult {
        let job_id = match outcome {
            RunOutcome::Completed(result) => Some(&result.job_id),
            RunOutcome::Backgrounded(job) => Some(&job.job_id),
            _ => None,
        };
        if let Some(job_id) = job_id {
            self.remember_job(job_id, session_id);
        }
        let mut result = tool_result(RunContent::from_outcome(session_id, outcome));
        if let RunOutcome::Completed(done) = outcome {
            link_artifact(&mut result, done);
        }
        result
    }

    /// A bash outcome as the call's answer: a task for a job that went to
    /// the background when the client takes tasks, else the tool result.
    async fn answer(
        &self,
        session: &Session,
        session_id: &str,
        outcome: &RunOutcome,
        as_task: bool,
    ) -> CallToolResponse {
        match outcome {
            // A terminal awaiting input and a ready server answer with what
            // the caller acts on (the screen, the output so far): not a task.
            RunOutcome::Backgrounded(job)
                if as_task
                    && matches!(
                        job.reason,
                        BackgroundReason::Requested | BackgroundReason::Timer
                    ) =>
            {
                self.remember_job(&job.job_id, session_id);
                let started = session
                    .job(&job.job_id)
                    .await
                    .ok()
                    .map(|info| info.started_at_ms);
                tasks::created(session_id, &job.job_id, started).into()
            }
            _ => self.run_result(session_id, outcome).into(),
        }
    }

    /// The session (and its id) and the job a task id names.
    async fn task_session(&self, task_id: &str) -> Result<(Session, String, JobId), ErrorData> {
        let (session_id, job_id) = tasks::task_job(task_id)?;
        let session = self
            .runtime
            .session(session_id.as_str())
            .await
            .map_err(|err| task_error(&err))?;
        Ok((session, session_id, job_id))
    }

    /// The session a resource's job lives in.
    async fn resource_session(&self, uri: &ResourceUri) -> shellvisor::Result<(Session, String)> {
        match uri {
            ResourceUri::Job { session_id, .. } => self.session(Some(session_id)).await,
            ResourceUri::Artifact { job_id, .. } => {
                let known = self.job_sessions.get(job_id).map(|entry| entry.clone());
                self.session(known.as_deref()).await
            }
        }
    }

    async fn read(&self, uri: &str) -> shellvisor::Result<ResourceContents> {
        let parsed = ResourceUri::parse(uri)?;
        let (session, session_id) = self.resource_session(&parsed).await?;
        match parsed {
            ResourceUri::Job { job_id, .. } => {
                let job = read_job(&session, &session_id, &JobId::new(job_id)).await?;
                let text = serde_json::to_string_pretty(&job).map_err(|err| {
                    shellvisor::Error::InvalidRequest {
                        message: format!("could not encode the job: {err}"),
                    }
                })?;
                Ok(ResourceContents::text(text, uri).with_mime_type("application/json"))
            }
            ResourceUri::Artifact {
                job_id,
                offset,
                length,
            } => {
                let bytes = read_artifact(&session, &JobId::new(job_id), offset, length).await?;
                Ok(match String::from_utf8(bytes) {
                    Ok(text) => ResourceContents::text(text, uri),
                    Err(err) => ResourceContents::blob(BASE64.encode(err.into_bytes()), uri)
                        .with_mime_type("application/octet-stream"),
                })
            }
        }
    }

    async fn bash(
        &self,
        args: BashArgs,
        context: &RequestContext<RoleServer>,
    ) -> shellvisor::Result<CallToolResponse> {
        let (session, session_id) = self.session(args.session_id.as_deref()).await?;
        let request = args.request()?;
        let as_task = tasks::client_supports_tasks(context);
        if request.run_async {
            let outcome = session.run(request).await?;
            return Ok(self.answer(&session, &session_id, &outcome, as_task).await);
        }
        let progress_token = context.meta.get_progress_token();
        // Only a call that asked for progress listens to the session's events.
        let mut events = progress_token.as_ref().map(|_| session.subscribe());
        let run = session.start_run(request).await?;
        let job_id = run.job_id().clone();
        let mut outcome = std::pin::pin!(run.outcome());
        // The first report is due one interval in. (An `interval`'s first tick
        // is immediate but goes through the timer wheel: awaiting it cost every
        // call about a millisecond.)
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + PROGRESS_INTERVAL,
            PROGRESS_INTERVAL,
        );
        let mut tail: Vec<u8> = Vec::new();
        let mut total: u64 = 0;
        let mut reported: u64 = 0;
        loop {
            tokio::select! {
                outcome = &mut outcome => {
                    return Ok(self.answer(&session, &session_id, &outcome?, as_task).await);
                }
                () = context.ct.cancelled() => {
                    // A cancelled call interrupts its foreground command.
                    tracing::debug!(job = %job_id, "call cancelled; killing its command");
                    session.kill(&job_id).await?;
                    return Err(shellvisor::Error::InvalidRequest { message: "cancelled".to_owned() });
                }
                event = next_event(events.as_mut()), if events.is_some() => {
                    match event {
                        // The session's event stream ended: stop listening.
                        None => events = None,
                        Some(SessionEvent::Output { job_id: id, offset, data }) if id == job_id => {
                            total = offset + data.len() as u64;
                            tail.extend_from_slice(&data);
                            let excess = tail.len().saturating_sub(PROGRESS_TAIL_BYTES * 4);
                            tail.drain(..excess);
                        }
                        // The flood guard left a range out: count it; the
                        // last line shown is the last one streamed.
                        Some(SessionEvent::OutputSuppressed { job_id: id, offset, bytes, .. })
                            if id == job_id =>
                        {
                            total = offset + bytes;
                        }
                        _ => {}
                    }
                }
                _ = ticker.tick(), if progress_token.is_some() => {
                    if let Some(token) = &progress_token
                        && total > reported
                    {
                        reported = total;
                        notify_progress(context, token.clone(), total, last_line(&tail)).await;
                    }
                }
            }
        }
    }

    async fn call(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let outcome = match name {
            "bash" => self.bash(parse(arguments)?, context).await,
            other => self
                .call_job_tool(other, arguments)
                .await?
                .map(CallToolResponse::from),
        };
        // Errors of the runtime (a refused request, an unknown job) are tool
        // errors the model should read, with their stable code.
        Ok(outcome.unwrap_or_else(|err| tool_error(&err).into()))
    }

    /// The tools other than `bash`.
    async fn call_job_tool(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<shellvisor::Result<CallToolResult>, ErrorData> {
        Ok(match name {
            "job_output" => self.job_output(parse(arguments)?).await,
            "job_wait" => self.job_wait(parse(arguments)?).await,
            "job_kill" => self.job_kill(parse(arguments)?).await,
            "job_list" => self.job_list(parse(arguments)?).await,
            "write_stdin" => self.write_stdin(parse(arguments)?).await,
            "pty_screen" => self.pty_screen(parse(arguments)?).await,
            "session_close" => self.session_close(parse(arguments)?).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool: {other}"),
                    None,
                ));
            }
        })
    }

    async fn job_output(&self, args: JobOutputArgs) -> shellvisor::Result<CallToolResult> {
        let (session, session_id) = self.session(args.session_id.as_deref()).await?;
        let job_id = JobId::new(args.job_id.clone());
        let offset = args.offset.unwrap_or(0);
        let max = args
            .max_bytes
            .unwrap_or(DEFAULT_OUTPUT_BYTES)
            .min(MAX_OUTPUT_BYTES);
        let chunk = session.read_output(&job_id, offset, max).await?;
        let bytes = chunk.data.len() as u64;
        self.remember_offset((session_id, args.job_id.clone()), chunk.offset + bytes);
        let structured = OutputContent {
            job_id: args.job_id,
            offset: chunk.offset,
            bytes,
            next_offset: chunk.offset + bytes,
            total_bytes: chunk.total_bytes,
            closed: chunk.closed,
        };
        let text = String::from_utf8_lossy(&chunk.data).into_owned();
        Ok(tool_result((structured, text, false)))
    }

    async fn job_wait(&self, args: JobWaitArgs) -> shellvisor::Result<CallToolResult> {
        let (session, session_id) = self.session(args.session_id.as_deref()).await?;
        let job_ids = args.job_ids()?;
        let timeout = wait_timeout(args.timeout);
        if let [job_id] = job_ids.as_slice() {
            return result_or_state(&session, &session_id, job_id, timeout, Asked::Wait).await;
        }
        if let Some(result) = session.wait_any(&job_ids, timeout).await? {
            let mut answer = tool_result((
                RunContent::from_result(&session_id, &result),
                result.text.clone(),
                result.is_error,
            ));
            link_artifact(&mut answer, &result);
            return Ok(answer);
        }
        let mut jobs = Vec::with_capacity(job_ids.len());
        for job_id in &job_ids {
            jobs.push(self.progress(&session, &session_id, job_id).await?);
        }
        let text = jobs
            .iter()
            .map(|job| {
                let new = if job.new_output.is_empty() {
                    "no new output".to_owned()
                } else {
                    format!("new output:\n{}", job.new_output.trim_end())
                };
                format!(
                    "Job {} is {} ({} bytes of output); {new}",
                    job.job_id,
                    job.state.replace('_', " "),
                    job.output_bytes
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        let structured = RunContent {
            status: "running".to_owned(),
            session_id,
            state: "running".to_owned(),
            jobs: Some(jobs),
            ..RunContent::default()
        };
        Ok(tool_result((structured, text, false)))
    }

    /// Notes where this connection stopped reading a job's output. Bounded:
    /// past [`MAX_READ_OFFSETS`] jobs the notes start afresh (a job's next
    /// wait then shows its output from the start).
    fn remember_offset(&self, key: (String, String), offset: u64) {
        if self.read_offsets.len() >= MAX_READ_OFFSETS {
            self.read_offsets.clear();
        }
        self.read_offsets.insert(key, offset);
    }

    /// A job's state and its output since this connection last read it.
    async fn progress(
        &self,
        session: &Session,
        session_id: &str,
        job_id: &JobId,
    ) -> shellvisor::Result<JobProgress> {
        let info = session.job(job_id).await?;
        let key = (session_id.to_owned(), job_id.to_string());
        let from = self.read_offsets.get(&key).map_or(0, |offset| *offset);
        let chunk = session
            .read_output(job_id, from, WAIT_NEW_OUTPUT_BYTES)
            .await?;
        let next_offset = chunk.offset + chunk.data.len() as u64;
        self.remember_offset(key, next_offset);
        Ok(JobProgress {
            job_id: job_id.to_string(),
            state: job_state(&info).to_owned(),
            output_bytes: info.output_bytes,
            new_output: String::from_utf8_lossy(&chunk.data).into_owned(),
            next_offset,
        })
    }

    async fn job_kill(&self, args: JobArgs) -> shellvisor::Result<CallToolResult> {
        let (session, session_id) = self.session(args.session_id.as_deref()).await?;
        let job_id = JobId::new(args.job_id);
        session.kill(&job_id).await?;
        // The kill worked when the job ended, whatever its result says (a
        // killed command's own exit is not the tool's failure); still
        // running after it is the error worth flagging.
        result_or_state(
            &session,
            &session_id,
            &job_id,
            Duration::from_secs(5),
            Asked::Kill,
        )
        .await
    }

    async fn job_list(&self, args: JobListArgs) -> shellvisor::Result<CallToolResult> {
        let (session, session_id) = self.session(args.session_id.as_deref()).await?;
        let page = session.jobs_page(args.query()).await?;
        let (structured, text) = JobList::new(&session_id, &page);
        Ok(tool_result((structured, text, false)))
    }

    async fn write_stdin(&self, args: WriteStdinArgs) -> shellvisor::Result<CallToolResult> {
        let (session, _) = self.session(args.session_id.as_deref()).await?;
        let (state, screen) = write_and_settle(&session, &args).await?;
        let (structured, text) = ScreenContent::new(&JobId::new(args.job_id), state, &screen);
        Ok(tool_result((structured, text, false)))
    }

    async fn session_close(&self, args: SessionCloseArgs) -> shellvisor::Result<CallToolResult> {
        let id = args
            .session_id
            .unwrap_or_else(|| self.options.default_session.clone());
        self.runtime.close_session(id.as_str()).await;
        Ok(tool_result(SessionClosed::new(id)))
    }

    async fn pty_screen(&self, args: JobArgs) -> shellvisor::Result<CallToolResult> {
        let (session, _) = self.session(args.session_id.as_deref()).await?;
        let job_id = JobId::new(args.job_id);
        let term = session.pty(&job_id);
        let screen = term.screen().await?;
        let state = term.state().await?;
        let (structured, text) = ScreenContent::new(&job_id, state, &screen);
        Ok(tool_result((structured, text, false)))
    }
}

impl ServerHandler for ShellServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tasks()
                .build(),
        )
            .with_server_info(Implementation::new("shellvisor", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Run shell commands with `bash`. The shell persists per session_id (cwd and exported variables carry \
                 over). Long runs come back as background jobs; use job_wait / job_output / job_kill. Terminal programs \
                 (`pty: true`) that wait for input come back with their screen; continue with write_stdin.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // The retained jobs of the sessions this connection ran jobs in, by
        // session id, a page at a time: the cursor names the session and
        // where in its jobs the page before ended.
        let from = match request.and_then(|request| request.cursor) {
            Some(cursor) => Some(ResourceCursor::parse(&cursor).ok_or_else(|| {
                ErrorData::invalid_params(format!("unknown cursor {cursor:?}"), None)
            })?),
            None => None,
        };
        let sessions: std::collections::BTreeSet<String> = self
            .job_sessions
            .iter()
            .map(|entry| entry.value().clone())
            .filter(|id| {
                from.as_ref()
                    .is_none_or(|from| id.as_str() >= from.session.as_str())
            })
            .collect();
        let mut resources = Vec::new();
        let mut next_cursor = None;
        for session_id in sessions {
            let left = RESOURCES_PER_PAGE - resources.len();
            if left == 0 {
                next_cursor = Some(ResourceCursor::start_of(&session_id));
                break;
            }
            let Ok(session) = self.runtime.session(session_id.as_str()).await else {
                continue;
            };
            let cursor = from
                .as_ref()
                .filter(|from| from.session == session_id)
                .map(|from| from.job);
            let Ok(page) = session
                .jobs_page(JobQuery {
                    cursor,
                    limit: left,
                })
                .await
            else {
                continue;
            };
            for info in &page.jobs {
                resources.push(
                    Resource::new(
                        ResourceUri::job(&session_id, info.job_id.as_str()),
                        info.job_id.to_string(),
                    )
                    .with_title(info.label.clone())
                    .with_description(format!(
                        "Job state ({}) and the end of its output",
                        job_state(info)
                    ))
                    .with_mime_type("application/json"),
                );
            }
            if let Some(job) = page.next_cursor {
                next_cursor = Some(
                    ResourceCursor {
                        session: session_id,
                        job,
                    }
                    .to_string(),
                );
                break;
            }
        }
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("job://{session_id}/{job_id}", "job")
                .with_description(
                    "A job's state and the end of its output (JSON); subscribe to hear when it changes.",
                )
                .with_mime_type("application/json"),
            ResourceTemplate::new("artifact://{job_id}{?offset,length}", "artifact")
                .with_description(
                    "A job's complete raw output, byte-exact (text, or a base64 blob when it is not UTF-8); at most \
                     16 MiB per read: ask for the rest with offset and length.",
                ),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match self.read(&request.uri).await {
            Ok(contents) => Ok(ReadResourceResult::new(vec![contents]).into()),
            Err(err) => Err(resource_error(&err)),
        }
    }

    #[allow(deprecated)] // the 2025 protocol's subscriptions, which 2025-11-25 clients use
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let parsed = ResourceUri::parse(&request.uri).map_err(|err| resource_error(&err))?;
        let ResourceUri::Job { session_id, job_id } = &parsed else {
            return Err(ErrorData::invalid_params(
                "only job:// resources can be subscribed to (an artifact only grows while its job runs)",
                None,
            ));
        };
        let session = self
            .runtime
            .session(session_id.as_str())
            .await
            .map_err(|err| resource_error(&err))?;
        let job_id = JobId::new(job_id.clone());
        session
            .job(&job_id)
            .await
            .map_err(|err| resource_error(&err))?;
        let uri = request.uri.clone();
        self.subscriptions
            .add(request.uri, session_id, &session, &context.peer);
        // A job that ended before the watcher listened will send no event:
        // asked again now that it listens, an ended job is told at once (a
        // job ending in between may be told twice, which is harmless).
        let ended = session
            .job(&job_id)
            .await
            .is_ok_and(|info| info.state != JobStatus::Running);
        if ended {
            subscriptions::tell(&context.peer, uri).await;
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.remove(&request.uri);
        Ok(())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        self.call(&request.name, arguments, &context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let (session, session_id, job_id) = self.task_session(&request.task_id).await?;
        tasks::get(&session, &request.task_id, &job_id, |result| {
            let mut answer = tool_result((
                RunContent::from_result(&session_id, result),
                result.text.clone(),
                result.is_error,
            ));
            link_artifact(&mut answer, result);
            answer
        })
        .await
        .map_err(|err| task_error(&err))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (session, _, job_id) = self.task_session(&request.task_id).await?;
        session.kill(&job_id).await.map_err(|err| task_error(&err))
    }
}

/// What a caller of [`result_or_state`] asked for, which decides what
/// counts as the tool's failure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// The job's result: an error result is an error; still running is not.
    Wait,
    /// The job's end: any result is success; still running is the error.
    Kill,
}

/// A job's result if it finishes within `timeout`, else its current state
/// (flagged as an error as `asked` decides).
async fn result_or_state(
    session: &Session,
    session_id: &str,
    job_id: &JobId,
    timeout: Duration,
    asked: Asked,
) -> shellvisor::Result<CallToolResult> {
    match session.wait(job_id, timeout).await? {
        Some(result) => {
            let mut answer = tool_result((
                RunContent::from_result(session_id, &result),
                result.text.clone(),
                asked == Asked::Wait && result.is_error,
            ));
            link_artifact(&mut answer, &result);
            Ok(answer)
        }
        None => {
            let info = session.job(job_id).await?;
            let (structured, text) = RunContent::running(session_id, &info);
            Ok(tool_result((structured, text, asked == Asked::Kill)))
        }
    }
}

/// A runtime error as a tool's error result, with its stable code.
fn tool_error(err: &shellvisor::Error) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(err.to_string())]);
    result.structured_content = Some(serde_json::json!({
        "error": err.code().as_str(),
        "message": err.to_string(),
    }));
    result
}

/// A runtime error on a task: an unknown job is an unknown task (`-32602`).
fn task_error(err: &shellvisor::Error) -> ErrorData {
    let data = Some(serde_json::json!({ "code": err.code().as_str() }));
    match err.code() {
        shellvisor::ErrorCode::JobNotFound => ErrorData::invalid_params(err.to_string(), data),
        _ => ErrorData::internal_error(err.to_string(), data),
    }
}

/// A runtime error on a resource as MCP's: an unknown job or URI is the
/// "resource not found" the specification names (`-32002`), with the
/// stable code in `data`.
fn resource_error(err: &shellvisor::Error) -> ErrorData {
    let data = Some(serde_json::json!({ "code": err.code().as_str() }));
    match err.code() {
        shellvisor::ErrorCode::JobNotFound | shellvisor::ErrorCode::InvalidRequest => {
            ErrorData::new(rmcp::model::ErrorCode(-32002), err.to_string(), data)
        }
        _ => ErrorData::internal_error(err.to_string(), data),
    }
}

/// Decodes a tool's arguments; a mismatch is the caller's error.
fn parse<T: DeserializeOwned>(
    arguments: serde_json::Map<String, serde_json::Value>,
) -> Result<T, ErrorData> {
    serde_json::from_value(serde_json::Value::Object(arguments))
        .map_err(|err| ErrorData::invalid_params(format!("invalid arguments: {err}"), None))
}

/// Adds a `resource_link` to the saved complete output of a run whose text
/// is cut (`artifact://<id>`, readable with `resources/read`).
fn link_artifact(answer: &mut CallToolResult, result: &RunResult) {
    if result.truncation.artifact.is_some() {
        let link = Resource::new(ResourceUri::artifact(result.job_id.as_str()), "output")
            .with_title(format!("Complete output of {}", result.job_id))
            .with_mime_type("text/plain")
            .with_size(result.truncation.total_bytes);
        answer.content.push(ContentBlock::resource_link(link));
    }
}

/// A tool result with text for the model and the same facts as structured content.
fn tool_result<S: Serialize>((structured, text, is_error): (S, String, bool)) -> CallToolResult {
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = serde_json::to_value(structured).ok();
    result
}

async fn notify_progress(
    context: &RequestContext<RoleServer>,
    token: ProgressToken,
    total: u64,
    message: String,
) {
    let param = ProgressNotificationParam::new(token, total as f64).with_message(message);
    if let Err(err) = context.peer.notify_progress(param).await {
        tracing::debug!(%err, "could not send progress");
    }
}

/// The last non-empty line of `tail`, sanitized, at most 200 bytes.
fn last_line(tail: &[u8]) -> String {
    let text = String::from_utf8_lossy(tail);
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let clean: String = line.chars().filter(|c| !c.is_control()).collect();
    let mut cut = clean.len().min(PROGRESS_TAIL_BYTES);
    while !clean.is_char_boundary(cut) {
        cut -= 1;
    }
    clean[..cut].to_owned()
}

impl From<&str> for McpOptions {
    fn from(default_session: &str) -> Self {
        Self {
            default_session: default_session.to_owned(),
        }
    }
}

/// The next event of `events`; never ready when there is none to listen to.
async fn next_event(events: Option<&mut shellvisor::Subscription>) -> Option<SessionEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// Jobs listed per `resources/list` page.
const RESOURCES_PER_PAGE: usize = 100;

/// Where a `resources/list` page starts: after job `job` (a
/// [`JobQuery`] cursor; 0 is before the first) of `session`. Written as
/// `<job>:<session>`, so the session id may hold any character.
#[derive(Debug, PartialEq)]
struct ResourceCursor {
    session: String,
    job: u64,
}

impl ResourceCursor {
    fn start_of(session: &str) -> String {
        Self {
            session: session.to_owned(),
            job: 0,
        }
        .to_string()
    }

    fn parse(cursor: &str) -> Option<Self> {
        let (job, session) = cursor.split_once(':')?;
        Some(Self {
            session: session.to_owned(),
            job: job.parse().ok()?,
        })
    }
}

impl std::fmt::Display for ResourceCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.job, self.session)
    }
}

#[cfg(test)]
mod tests {
    use super::ResourceCursor;

    #[test]
    fn a_resource_cursor_reads_back_whatever_its_session_id_holds() {
        let cursor = ResourceCursor {
            session: "a:b c".to_owned(),
            job: 42,
        };
        assert_eq!(cursor.to_string(), "42:a:b c");
        assert_eq!(ResourceCursor::parse(&cursor.to_string()), Some(cursor));
        assert_eq!(ResourceCursor::start_of("s"), "0:s");
        assert_eq!(ResourceCursor::parse("x:s"), None);
        assert_eq!(ResourceCursor::parse("no colon"), None);
    }
}
