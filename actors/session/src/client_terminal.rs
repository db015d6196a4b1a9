//! A pipe-mode run in a terminal the embedder's client owns (the reference
//! tool's client-terminal bridge): `bash -c <command>` in a new terminal,
//! raced against the deadline; a timeout kills before reading, a signal exit
//! reads 137, and the terminal is released whatever happens.

use std::sync::Arc;
use std::time::Instant;

use shellvisor_output::ResultTextParts;
use shellvisor_output::Stopped;
use shellvisor_output::render_output;
use shellvisor_output::result_text;
use shellvisor_policy::NON_INTERACTIVE_ENV;
use shellvisor_policy::RunPlan;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::TimeoutReason;
use shellvisor_protocol::Truncation;
use shellvisor_run::ClientCommand;
use shellvisor_run::ClientExit;
use shellvisor_run::ClientTerminals;
use shellvisor_run::RuntimeContext;

/// The exit code of a command a signal ended (as the reference tool reads it).
const SIGNAL_EXIT: i32 = 137;

/// Releases the terminal if the run is dropped before it could (its caller
/// went away): a terminal is always released.
struct Release {
    terminals: Arc<dyn ClientTerminals>,
    terminal: Option<String>,
}

impl Release {
    async fn now(mut self) -> std::result::Result<(), String> {
        match self.terminal.take() {
            Some(terminal) => self.terminals.release(&terminal).await,
            None => Ok(()),
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(terminal) = self.terminal.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let terminals = Arc::clone(&self.terminals);
            handle.spawn(async move {
                let _ = terminals.release(&terminal).await;
            });
        }
    }
}

/// Runs `plan` in a client terminal and shapes its result.
pub(crate) async fn run(
    ctx: Arc<RuntimeContext>,
    terminals: Arc<dyn ClientTerminals>,
    job_id: JobId,
    plan: RunPlan,
) -> Result<RunOutcome> {
    let started = Instant::now();
    let config = &ctx.config;
    let mut env: Vec<(String, String)> = NON_INTERACTIVE_ENV
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    env.extend(config.shell.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(plan.env.iter().cloned());
    let command = ClientCommand {
        command: "bash".to_owned(),
        args: vec!["-c".to_owned(), plan.command.clone()],
        cwd: plan.start_dir().to_path_buf(),
        env,
        output_byte_limit: config.output.inline_bytes as u64,
    };
    let terminal = terminals
        .create(command)
        .await
        .map_err(|reason| Error::Spawn {
            what: "a client terminal".to_owned(),
            message: reason,
        })?;
    let release = Release {
        terminals: Arc::clone(&terminals),
        terminal: Some(terminal.clone()),
    };
    let mut notices = plan.notices.clone();
    let exit = async { terminals.wait_for_exit(&terminal).await };
    let waited = match plan.timeout.deadline {
        Some(deadline) => tokio::time::timeout(deadline, exit).await.ok(),
        None => Some(exit.await),
    };
    let (exit, timed_out) = match waited {
        Some(Ok(exit)) => (Some(exit), false),
        Some(Err(reason)) => {
            notices.push(format!(
                "The client terminal did not report an exit: {reason}."
            ));
            (None, false)
        }
        None => {
            // Killed before the output is read, so what is read is final.
            if let Err(reason) = terminals.kill(&terminal).await {
                notices.push(format!(
                    "The client terminal could not be killed: {reason}."
                ));
            }
            (None, true)
        }
    };
    let output = match terminals.output(&terminal).await {
        Ok(output) => output,
        Err(reason) => {
            notices.push(format!(
                "The client terminal's output could not be read: {reason}."
            ));
            Default::default()
        }
    };
    if let Err(reason) = release.now().await {
        notices.push(format!(
            "The client terminal could not be released: {reason}."
        ));
    }
    if output.truncated {
        notices.push("(output truncated)".to_owned());
    }
    let exit = exit.or(output.exit.clone());
    let exit_code = exit.as_ref().and_then(exit_code).filter(|_| !timed_out);
    let bytes = output.output.as_bytes();
    let rendered = render_output(
        bytes,
        &[],
        bytes.len() as u64,
        memchr_count(bytes),
        config.output.max_columns,
        config.output.inline_bytes,
    );
    let wall_time = started.elapsed();
    let stopped =
        timed_out.then(|| Stopped::Deadline(plan.timeout.info.effective_secs.unwrap_or(0)));
    let text = result_text(&ResultTextParts {
        body: &rendered.body,
        stopped,
        wall_time,
        notices: &notices,
        exit_code,
        truncation_notice: None,
    });
    let truncation = Truncation {
        truncated: output.truncated || rendered.truncated(),
        total_bytes: bytes.len() as u64,
        total_lines: rendered.total_lines,
        shown_bytes: rendered.shown_bytes,
        shown_lines: rendered.shown_lines,
        tail_offset: rendered.tail_offset,
        artifact: None,
        spill_error: None,
        minimizer: None,
    };
    Ok(RunOutcome::Completed(RunResult {
        job_id,
        exit_code,
        timed_out,
        timeout_reason: timed_out.then_some(TimeoutReason::Deadline),
        killed: false,
        cwd: Some(plan.start_dir().display().to_string()),
        wall_time_ms: u64::try_from(wall_time.as_millis()).unwrap_or(u64::MAX),
        output: rendered.body,
        truncation,
        notices,
        timeout: plan.timeout.info,
        shell_restarted: false,
        is_error: timed_out || exit_code != Some(0),
        text,
        screen: None,
        limits: None,
    }))
}

/// The exit code, or 137 for a signal exit.
fn exit_code(exit: &ClientExit) -> Option<i32> {
    match (exit.exit_code, &exit.signal) {
        (Some(code), _) => Some(i32::try_from(code).unwrap_or(i32::MAX)),
        (None, Some(_)) => Some(SIGNAL_EXIT),
        (None, None) => None,
    }
}

fn memchr_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}
