//! `shellvisor run`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use shellvisor::Config;
use shellvisor::JobId;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::Runtime;
use shellvisor::Session;
use shellvisor::SessionEvent;

use crate::attach::attach;
use crate::printer::OutputPrinter;

/// Exit code when the deadline fired (as `timeout(1)` uses).
const TIMED_OUT_EXIT: u8 = 124;
/// How long one wait for a background job lasts before waiting again.
const WAIT_SLICE: Duration = Duration::from_secs(3600);

/// Arguments of `shellvisor run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Session to run in.
    #[arg(long, default_value = "cli")]
    pub session: String,
    /// Deadline in seconds (0 disables it; default 300).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Working directory.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Start the command as a background job (its output still streams here).
    #[arg(long = "async")]
    pub run_async: bool,
    /// Turn the run into a background job after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub auto_background: Option<u64>,
    /// Run on a pseudo-terminal with this terminal attached: keystrokes go to
    /// the program (raw mode when stdin is a terminal), its screen comes back.
    #[arg(long, conflicts_with_all = ["run_async", "auto_background"])]
    pub pty: bool,
    /// The command (joined with spaces into one shell command line).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

pub(crate) async fn run(mut config: Config, args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(seconds) = args.auto_background {
        config.jobs.auto_background = true;
        config.jobs.auto_background_secs = seconds;
    }
    let runtime = Runtime::start(config)
        .await
        .context("starting the runtime")?;
    let work = async {
        if args.pty {
            attach(&runtime, args).await
        } else {
            run_in(&runtime, args).await
        }
    };
    let outcome = crate::until_signalled(work).await;
    runtime.shutdown().await;
    match outcome? {
        Ok(outcome) => outcome,
        Err(signal_exit) => Ok(ExitCode::from(signal_exit)),
    }
}

/// What a phase produced.
enum Answer {
    /// The call answered.
    Outcome(RunOutcome),
    /// The background job finished.
    Finished(RunResult),
}

/// Where the run stands while its output streams.
enum Phase {
    /// The call has not answered yet.
    Calling(tokio::task::JoinHandle<shellvisor::Result<RunOutcome>>),
    /// The run went to the background; waiting for its result.
    Waiting(tokio::task::JoinHandle<shellvisor::Result<RunResult>>),
}

async fn run_in(runtime: &Runtime, args: RunArgs) -> anyhow::Result<ExitCode> {
    let session = runtime.session(args.session.as_str()).await?;
    let mut events = session.subscribe();
    let mut request = RunRequest::new(args.command.join(" ")).run_async(args.run_async);
    request.timeout = args.timeout;
    request.cwd = args.cwd;
    let running = session.clone();
    let mut phase = Phase::Calling(tokio::spawn(async move { running.run(request).await }));

    let mut printer = OutputPrinter::new(session.clone());
    let mut job: Option<JobId> = None;
    let result = loop {
        let finished = async {
            anyhow::Ok(match &mut phase {
                Phase::Calling(call) => {
                    Answer::Outcome(call.await.context("the run task failed")??)
                }
                Phase::Waiting(wait) => {
                    Answer::Finished(wait.await.context("the wait task failed")??)
                }
            })
        };
        tokio::select! {
            answer = finished => match answer? {
                Answer::Outcome(RunOutcome::Completed(result)) | Answer::Finished(result) => break result,
                Answer::Outcome(RunOutcome::Backgrounded(started)) => {
                    eprintln!("shellvisor: {}", started.text.lines().find(|l| l.starts_with("Background job")).unwrap_or("backgrounded"));
                    job = Some(started.job_id.clone());
                    let waiting = session.clone();
                    phase = Phase::Waiting(tokio::spawn(async move { wait_for(&waiting, &started.job_id).await }));
                }
                Answer::Outcome(_) => anyhow::bail!("unexpected outcome"),
            },
            Some(event) = events.recv() => match event {
                SessionEvent::JobStarted { job_id, .. } if job.is_none() => job = Some(job_id),
                event => {
                    if let Some(job) = &job {
                        printer.on_event(job, &event).await?;
                    }
                }
            },
        }
    };
    // Whatever the stream did not deliver (a lagging subscriber) is read back.
    printer
        .finish(
            &result.job_id,
            result.truncation.total_bytes,
            result.truncation.tail_offset,
        )
        .await?;
    Ok(exit_code(&result))
}

/// Reports a finished run's notices and maps it to an exit code.
pub(crate) fn exit_code(result: &RunResult) -> ExitCode {
    for notice in &result.notices {
        eprintln!("shellvisor: {notice}");
    }
    if result.timed_out {
        eprintln!(
            "shellvisor: [Command timed out after {} seconds]",
            result.timeout.effective_secs.unwrap_or(0)
        );
        return ExitCode::from(TIMED_OUT_EXIT);
    }
    match result.exit_code {
        Some(code) => ExitCode::from(u8::try_from(code.rem_euclid(256)).unwrap_or(1)),
        None => ExitCode::from(1),
    }
}

/// Waits for a background job's result, however long it runs.
pub(crate) async fn wait_for(session: &Session, job: &JobId) -> shellvisor::Result<RunResult> {
    loop {
        if let Some(result) = session.wait(job, WAIT_SLICE).await? {
            return Ok(result);
        }
    }
}
