//! The MCP Tasks extension (SEP-2663, as rmcp 3.11 implements it): for a
//! client that declares `io.modelcontextprotocol/tasks`, a `bash` call that
//! goes to the background is answered with a task instead of a job id, and
//! the task *is* the job: its id is the job's `job://<session>/<job>` URI,
//! `tasks/get` reads the job (its final `bash` result once it finished) and
//! `tasks/cancel` kills it.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::CallToolResult;
use rmcp::model::CreateTaskResult;
use rmcp::model::DetailedTask;
use rmcp::model::GetTaskResult;
use rmcp::model::Task;
use rmcp::model::TaskPayload;
use rmcp::model::TaskStatus;
use rmcp::service::RequestContext;
use shellvisor::JobId;
use shellvisor::JobInfo;
use shellvisor::JobStatus;
use shellvisor::PtyState;
use shellvisor::Session;

use crate::resources::ResourceUri;

/// How often a client should poll `tasks/get`.
const POLL_INTERVAL_MS: u64 = 500;
/// How long taking a finished job's result may take.
const TAKE: Duration = Duration::from_secs(5);

/// Whether the client declared the tasks extension.
pub(super) fn client_supports_tasks(context: &RequestContext<RoleServer>) -> bool {
    context
        .peer
        .peer_info()
        .is_some_and(|info| info.capabilities.supports_tasks())
}

/// The task answered for a job that went to the background (created when
/// the job started, `started_at_ms`, as `tasks/get` says too).
pub(super) fn created(
    session_id: &str,
    job_id: &JobId,
    started_at_ms: Option<u64>,
) -> CreateTaskResult {
    CreateTaskResult::new(
        Task::new(
            ResourceUri::job(session_id, job_id.as_str()),
            TaskStatus::Working,
            timestamp(started_at_ms),
            timestamp(None),
        )
        .with_status_message("running")
        .with_poll_interval_ms(POLL_INTERVAL_MS),
    )
}

/// The session and job a task id names.
///
/// # Errors
/// `-32602` for an id that is not one of this server's tasks.
pub(super) fn task_job(task_id: &str) -> Result<(String, JobId), ErrorData> {
    match ResourceUri::parse(task_id) {
        Ok(ResourceUri::Job { session_id, job_id }) => Ok((session_id, JobId::new(job_id))),
        _ => Err(ErrorData::invalid_params(
            format!("unknown task {task_id:?}: this server's task ids are job://<session>/<job>"),
            None,
        )),
    }
}

/// `tasks/get`: the job's state, or its final result (`result` builds the
/// `bash` result from the job's).
pub(super) async fn get(
    session: &Session,
    task_id: &str,
    job_id: &JobId,
    result: impl FnOnce(&shellvisor::RunResult) -> CallToolResult,
) -> shellvisor::Result<GetTaskResult> {
    let info = session.job(job_id).await?;
    let created = timestamp(Some(info.started_at_ms));
    let updated = timestamp(None);
    let base = |status| {
        Task::new(task_id, status, created.clone(), updated.clone())
            .with_poll_interval_ms(POLL_INTERVAL_MS)
    };
    if info.state == JobStatus::Running {
        let task = base(TaskStatus::Working).with_status_message(running_message(&info));
        return Ok(GetTaskResult::new(DetailedTask::new(
            task,
            TaskPayload::Working,
        )));
    }
    let Some(done) = session.wait(job_id, TAKE).await? else {
        let task = base(TaskStatus::Working).with_status_message("finishing");
        return Ok(GetTaskResult::new(DetailedTask::new(
            task,
            TaskPayload::Working,
        )));
    };
    if done.killed {
        let task = base(TaskStatus::Cancelled).with_status_message("killed");
        return Ok(GetTaskResult::new(DetailedTask::new(
            task,
            TaskPayload::Cancelled,
        )));
    }
    let answer = serde_json::to_value(result(&done))
        .ok()
        .and_then(|value| value.as_object().cloned())
        .unwrap_or_default();
    let task = base(TaskStatus::Completed);
    Ok(GetTaskResult::new(DetailedTask::new(
        task,
        TaskPayload::Completed { result: answer },
    )))
}

fn running_message(info: &JobInfo) -> String {
    let state = match info.pty_state {
        Some(PtyState::AwaitingInput) => "awaiting terminal input",
        _ => "running",
    };
    format!("{state}; {} bytes of output so far", info.output_bytes)
}

/// ISO 8601 (RFC 3339, UTC) of `millis` since the epoch, or of now.
fn timestamp(millis: Option<u64>) -> String {
    let at = millis
        .and_then(|millis| i64::try_from(millis).ok())
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_else(chrono::Utc::now);
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
