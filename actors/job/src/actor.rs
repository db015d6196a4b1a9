//! The Job actor.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use ractor::MessagingErr;
use ractor::RpcReplyPort;
use ractor::SupervisionEvent;
use ractor::rpc::CallResult;
use shellvisor_actor_pty::PtyArgs;
use shellvisor_actor_pty::PtyCall;
use shellvisor_actor_pty::PtyEvent;
use shellvisor_actor_pty::PtyMsg;
use shellvisor_actor_pty::PtySession;
use shellvisor_actor_shell::AbortOnDrop;
use shellvisor_actor_shell::ExecOutcome;
use shellvisor_actor_shell::ExecRequest;
use shellvisor_actor_shell::KillReason;
use shellvisor_actor_shell::RunEnd;
use shellvisor_actor_shell::ShellEvent;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_actor_sink::Sink;
use shellvisor_actor_sink::SinkArgs;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_actor_sink::SinkMsg;
use shellvisor_output::awaiting_input_text;
use shellvisor_output::background_text;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::Spawner;
use shellvisor_process::pty::Terminal;
use shellvisor_process::pty::TerminalSpawnSpec;
use shellvisor_protocol::BackgroundReason;
use shellvisor_protocol::BackgroundedRun;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::JobInfo;
use shellvisor_protocol::JobState as JobStatus;
use shellvisor_protocol::OutputConfig;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::Screen;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::TerminalSize;
use tokio::sync::broadcast;

use crate::messages::JobMsg;
use crate::messages::JobNotice;
use crate::messages::RunPlan;
use crate::result::build_result;
use crate::slots::JobSlots;
use crate::slots::SlotGuard;

/// Extra time, past the kill grace, that a Shell may take to report a killed run.
const UNRESPONSIVE_AFTER_KILL: Duration = Duration::from_secs(5);
/// How many times a run refused by a dead shell is moved to a fresh one.
const MAX_SHELL_RETRIES: u32 = 2;
/// How long the Sink may take to render a preview.
const PREVIEW_DEADLINE: Duration = Duration::from_secs(2);
/// Longest preview in a backgrounded run's answer (the reference's tail cap).
const MAX_PREVIEW_BYTES: usize = 50 * 1024;

/// A job's timers (deadline, auto-background, watchdog, eviction), aborted with its state.
type AbortTimer = AbortOnDrop<std::result::Result<(), MessagingErr<JobMsg>>>;

/// The Job actor (see the crate documentation).
#[derive(Debug)]
pub struct Job;

/// How a job starts.
#[derive(Debug)]
pub enum JobStart {
    /// A caller waits for the result; after `auto_background` (if set) the
    /// run is answered as a background job and goes on.
    Foreground {
        /// The caller.
        reply: RpcReplyPort<Result<RunOutcome>>,
        /// When to background it.
        auto_background: Option<Duration>,
    },
    /// Already a background job (explicit async), holding its slot.
    Background {
        /// Its running-job slot.
        slot: SlotGuard,
    },
}

/// What runs the command.
#[derive(Debug)]
pub enum Runner {
    /// A shell lent by the Session (the persistent one or an isolated one).
    Shell(ActorRef<ShellMsg>),
    /// A program on a pseudo-terminal, run by a PtySession the Job starts.
    Pty(Box<PtyLaunch>),
}

/// What a PtySession needs from the Session.
#[derive(Debug)]
pub struct PtyLaunch {
    /// The open terminal.
    pub terminal: Terminal,
    /// Its size.
    pub size: TerminalSize,
    /// The program (`bash -c <command>`) with its environment and cwd.
    pub spec: TerminalSpawnSpec,
    /// The runtime's spawner thread.
    pub spawner: Arc<Spawner>,
    /// The runtime's registry of live process groups and sessions.
    pub registry: Arc<ProcessRegistry>,
    /// How often to check for input waits.
    pub probe_interval: Duration,
    /// How long late output may take after the program exits.
    pub drain: Duration,
    /// Output coalescing for streaming, in milliseconds.
    pub stream_throttle_ms: u64,
}

/// What a Job needs.
#[derive(Debug)]
pub struct JobArgs {
    /// The run's id.
    pub job_id: JobId,
    /// What to run.
    pub plan: RunPlan,
    /// What runs it.
    pub runner: Runner,
    /// How it starts.
    pub start: JobStart,
    /// The running-job caps (for auto-background).
    pub slots: JobSlots,
    /// The Session's notice channel.
    pub notify: DerivedActorRef<JobNotice>,
    /// The session's event channel.
    pub events: broadcast::Sender<SessionEvent>,
    /// Output buffering.
    pub output: OutputConfig,
    /// Where the artifact goes.
    pub artifact_path: PathBuf,
    /// How long the finished job stays readable.
    pub retention: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// The follow-up line of a background answer (`{job_id}` stands for the id).
    pub background_hint: Arc<str>,
}

/// A Job's state.
#[derive(Debug)]
pub struct JobState {
    job_id: JobId,
    plan: RunPlan,
    shell: Option<ActorRef<ShellMsg>>,
    pty: Option<ActorRef<PtyMsg>>,
    pty_state: Option<PtyState>,
    screen: Option<Screen>,
    sink: ActorRef<SinkMsg>,
    feed: SinkFeed,
    shell_retries: u32,
    notify: DerivedActorRef<JobNotice>,
    events: broadcast::Sender<SessionEvent>,
    started: Instant,
    started_at_ms: u64,
    reply: Option<RpcReplyPort<Result<RunOutcome>>>,
    slots: JobSlots,
    slot: Option<SlotGuard>,
    background: Option<BackgroundReason>,
    deadline: Option<AbortTimer>,
    auto_timer: Option<AbortTimer>,
    watchdog: Option<AbortTimer>,
    kill_sent: bool,
    waiters: Vec<RpcReplyPort<Result<Box<RunResult>>>>,
    kill_waiters: Vec<RpcReplyPort<Result<()>>>,
    result: Option<Box<RunResult>>,
    delivered: bool,
    /// The retention timer; aborted with the state so it never outlives the job.
    evict_timer: Option<AbortTimer>,
    inline_cap: usize,
    background_hint: Arc<str>,
    retention: Duration,
    kill_grace: Duration,
}

impl Actor for Job {
    type Msg = JobMsg;
    type State = JobState;
    type Arguments = JobArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<JobMsg>,
        args: JobArgs,
    ) -> std::result::Result<JobState, ActorProcessingErr> {
        tracing::trace!(target: "shellvisor::stage", "job: pre_start");
        let started = Instant::now();
        let mut output = args.output.clone();
        if let Runner::Pty(launch) = &args.runner {
            output.stream_throttle_ms = launch.stream_throttle_ms;
        }
        let (sink, _) = Actor::spawn_linked(
            None,
            Sink,
            SinkArgs {
                job_id: args.job_id.clone(),
                config: output,
                artifact_path: args.artifact_path,
                events: args.events.clone(),
            },
            myself.get_cell(),
        )
        .await?;
        tracing::trace!(target: "shellvisor::stage", "job: sink spawned");
        let _ = args.events.send(SessionEvent::JobStarted {
            job_id: args.job_id.clone(),
            command: args.plan.command.clone(),
        });
        let deadline = args
            .plan
            .timeout
            .deadline
            .map(|after| AbortOnDrop(myself.send_after(after, || JobMsg::DeadlineElapsed)));
        let (reply, slot, background, auto_timer) = match args.start {
            JobStart::Foreground {
                reply,
                auto_background,
            } => {
                let timer = auto_background
                    .map(|after| AbortOnDrop(myself.send_after(after, || JobMsg::AutoBackground)));
                (Some(reply), None, None, timer)
            }
            JobStart::Background { slot } => {
                (None, Some(slot), Some(BackgroundReason::Requested), None)
            }
        };
        let started_at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let feed = SinkFeed::new(sink.clone());
        let (shell, pty, pty_state, pty_failure) = match args.runner {
            Runner::Shell(shell) => (Some(shell), None, None, None),
            Runner::Pty(launch) => {
                let launch = *launch;
                let pty_args = PtyArgs {
                    job_id: args.job_id.clone(),
                    terminal: launch.terminal,
                    size: launch.size,
                    spec: launch.spec,
                    spawner: launch.spawner,
                    registry: launch.registry,
                    sink: feed.clone(),
                    reply_to: myself.get_derived(),
                    events: args.events.clone(),
                    kill_grace: args.kill_grace,
                    probe_interval: launch.probe_interval,
                    drain: launch.drain,
                };
                match Actor::spawn_linked(None, PtySession, pty_args, myself.get_cell()).await {
                    Ok((pty, _)) => (None, Some(pty), Some(PtyState::Running), None),
                    Err(err) => (None, None, None, Some(err.to_string())),
                }
            }
        };
        let state = JobState {
            job_id: args.job_id,
            plan: args.plan,
            shell,
            pty,
            pty_state,
            screen: None,
            feed,
            shell_retries: 0,
            sink,
            notify: args.notify,
            events: args.events,
            started,
            started_at_ms,
            reply,
            slots: args.slots,
            slot,
            background,
            deadline,
            auto_timer,
            watchdog: None,
            kill_sent: false,
            waiters: Vec::new(),
            kill_waiters: Vec::new(),
            result: None,
            delivered: false,
            evict_timer: None,
            inline_cap: args.output.inline_bytes,
            background_hint: args.background_hint,
            retention: args.retention,
            kill_grace: args.kill_grace,
        };
        if let Some(reason) = pty_failure {
            tracing::warn!(job = %state.job_id, %reason, "could not start the program on a terminal");
            let _ = myself.cast(JobMsg::Shell(ShellEvent::Finished(Box::new(ExecOutcome {
                end: RunEnd::Refused {
                    reason: format!("the program could not be started on a terminal ({reason})"),
                },
                output: None,
            }))));
        } else {
            state.exec(&myself);
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<JobMsg>,
        message: JobMsg,
        state: &mut JobState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match message {
            JobMsg::Shell(ShellEvent::Finished(outcome)) => {
                let refused = matches!(outcome.end, RunEnd::Refused { .. });
                if refused
                    && state.shell.is_some()
                    && state.result.is_none()
                    && state.shell_retries < MAX_SHELL_RETRIES
                {
                    tracing::debug!(job = %state.job_id, "shell refused the run; asking for another");
                    state.shell_retries += 1;
                    let _ = state.notify.send_message(JobNotice::ShellRefused {
                        job_id: state.job_id.clone(),
                    });
                } else {
                    state.finish(&myself, *outcome);
                }
            }
            JobMsg::Pty(PtyEvent::State(pty_state)) => {
                if state.result.is_none() {
                    state.pty_state = Some(pty_state);
                    if pty_state == PtyState::AwaitingInput {
                        state.background_now(BackgroundReason::AwaitingInput).await;
                    }
                }
            }
            JobMsg::Pty(PtyEvent::Finished { outcome, screen }) => {
                state.screen = Some(screen);
                state.finish(&myself, *outcome);
            }
            JobMsg::PtyCall(call) => match &state.pty {
                Some(pty) => {
                    if let Err(MessagingErr::SendErr(PtyMsg::Call(call))) =
                        pty.cast(PtyMsg::Call(call))
                    {
                        call.refuse(Error::InputRejected {
                            reason: "the terminal session has stopped".to_owned(),
                        });
                    }
                }
                None => call.refuse(Error::NotInteractive {
                    id: state.job_id.to_string(),
                }),
            },
            JobMsg::UseShell(shell) => {
                if state.result.is_none() {
                    state.shell = Some(shell);
                    state.exec(&myself);
                }
            }
            JobMsg::ShellGone { reason } => state.finish(
                &myself,
                ExecOutcome {
                    end: RunEnd::ShellLost { reason },
                    output: None,
                },
            ),
            JobMsg::ReadOutput { offset, max, reply } => {
                if let Err(MessagingErr::SendErr(SinkMsg::Read { reply, .. })) =
                    state.sink.cast(SinkMsg::Read { offset, max, reply })
                {
                    let _ = reply.send(Err(Error::OutputUnavailable {
                        reason: "the output buffer of this job stopped".to_owned(),
                    }));
                }
            }
            JobMsg::GetInfo(reply) => {
                let info = state.info().await;
                let _ = reply.send(Ok(info));
            }
            JobMsg::Wait(reply) => match &state.result {
                Some(result) => {
                    if reply.send(Ok(result.clone())).is_ok() {
                        state.delivered = true;
                    }
                }
                None => state.waiters.push(reply),
            },
            JobMsg::Unclaim => state.delivered = false,
            JobMsg::Claim(reply) => {
                let claim = match &state.result {
                    Some(result) if !state.delivered => Some(result.clone()),
                    _ => None,
                };
                let claimed = claim.is_some();
                if reply.send(claim).is_ok() && claimed {
                    state.delivered = true;
                }
            }
            JobMsg::Kill(reply) => {
                if state.result.is_some() {
                    let _ = reply.send(Ok(()));
                } else {
                    state.kill_waiters.push(reply);
                    state.kill(&myself, KillReason::Cancelled);
                }
            }
            JobMsg::DeadlineElapsed => {
                state.deadline = None;
                if state.result.is_none() {
                    state.kill(&myself, KillReason::Timeout);
                }
            }
            JobMsg::AutoBackground => {
                state.auto_timer = None;
                state.background_now(BackgroundReason::Timer).await;
            }
            JobMsg::Unresponsive => {
                state.watchdog = None;
                if state.result.is_none() {
                    state.finish(
                        &myself,
                        ExecOutcome {
                            end: RunEnd::ShellLost {
                                reason: "the shell did not respond to being killed; output may be incomplete"
                                    .to_owned(),
                            },
                            output: None,
                        },
                    );
                }
            }
            JobMsg::Evict => {
                if state.background.is_some() && !state.delivered {
                    // Its result has not been delivered yet: keep it.
                    state.evict_timer = Some(AbortOnDrop(
                        myself.send_after(state.retention, || JobMsg::Evict),
                    ));
                } else {
                    myself.stop(Some("retention elapsed".to_owned()));
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<JobMsg>,
        event: SupervisionEvent,
        state: &mut JobState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        // The children are the Sink and, for a terminal run, the PtySession.
        // If the Sink dies the run goes on; its result says the output could
        // not be collected. If the PtySession dies the run is over (its
        // session guard killed the program). Never stop because of either.
        let (cell, reason) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "stopped".to_owned()))
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {
                return Ok(());
            }
        };
        let is_pty = state
            .pty
            .as_ref()
            .is_some_and(|pty| pty.get_id() == cell.get_id());
        if is_pty {
            state.pty = None;
            if state.result.is_none() {
                tracing::warn!(job = %state.job_id, %reason, "terminal session stopped during the run");
                state.finish(
                    &myself,
                    ExecOutcome {
                        end: RunEnd::ShellLost {
                            reason: format!("the terminal session stopped ({reason})"),
                        },
                        output: None,
                    },
                );
            }
        } else {
            tracing::debug!(job = %state.job_id, %reason, "output sink stopped");
        }
        Ok(())
    }
}

impl JobState {
    fn exec(&self, myself: &ActorRef<JobMsg>) {
        // A terminal run starts with its PtySession.
        let Some(shell) = &self.shell else {
            return;
        };
        let reply_to: DerivedActorRef<ShellEvent> = myself.get_derived();
        let request = ExecRequest {
            command: self.plan.command.clone(),
            cwd: self.plan.cwd.clone(),
            env: self.plan.env.clone(),
            sink: self.feed.clone(),
            reply_to,
        };
        if shell.cast(ShellMsg::Exec(request)).is_err() {
            let _ = myself.cast(JobMsg::Shell(ShellEvent::Finished(Box::new(ExecOutcome {
                end: RunEnd::Refused {
                    reason: "the shell had already stopped".to_owned(),
                },
                output: None,
            }))));
        }
    }

    /// Asks the shell to kill the run's process tree (once), with a watchdog
    /// in case the shell never reports.
    fn kill(&mut self, myself: &ActorRef<JobMsg>, reason: KillReason) {
        if self.kill_sent {
            return;
        }
        self.kill_sent = true;
        let sent = match (&self.shell, &self.pty) {
            (Some(shell), _) => shell.cast(ShellMsg::Kill(reason)).is_ok(),
            (None, Some(pty)) => pty.cast(PtyMsg::Kill(reason)).is_ok(),
            (None, None) => false,
        };
        if !sent {
            let _ = myself.cast(JobMsg::ShellGone {
                reason: "the shell stopped before it could be killed".to_owned(),
            });
        }
        let wait = self.kill_grace + UNRESPONSIVE_AFTER_KILL;
        self.watchdog = Some(AbortOnDrop(
            myself.send_after(wait, || JobMsg::Unresponsive),
        ));
    }

    /// The auto-background timer fired, or a terminal program waits for
    /// input: answer the caller with a background job, unless the run has
    /// finished (a stale timer) or the running-job cap is reached (the run
    /// then stays in the foreground).
    async fn background_now(&mut self, reason: BackgroundReason) {
        if self.result.is_some() || self.background.is_some() || self.reply.is_none() {
            return;
        }
        let slot = match self.slots.try_acquire() {
            Ok(slot) => slot,
            Err(limit) => {
                tracing::debug!(job = %self.job_id, limit, "running-job cap reached; the run stays in the foreground");
                return;
            }
        };
        let preview = match reason {
            BackgroundReason::AwaitingInput => self.screen_text().await,
            _ => match self
                .sink
                .call(SinkMsg::Snapshot, Some(PREVIEW_DEADLINE))
                .await
            {
                Ok(CallResult::Success(summary)) => {
                    tail(&summary.rendered.body, MAX_PREVIEW_BYTES).to_owned()
                }
                _ => String::new(),
            },
        };
        let Some(reply) = self.reply.take() else {
            return;
        };
        self.slot = Some(slot);
        self.background = Some(reason);
        // The Session frees the primary shell before the caller can call again.
        let _ = self.notify.send_message(JobNotice::Backgrounded {
            job_id: self.job_id.clone(),
        });
        let text = match reason {
            BackgroundReason::AwaitingInput => awaiting_input_text(
                self.job_id.as_str(),
                &self.plan.label,
                &preview,
                &self.plan.notices,
            ),
            _ => background_text(
                self.job_id.as_str(),
                &self.plan.label,
                &preview,
                &self.plan.notices,
                &self.background_hint,
            ),
        };
        let _ = reply.send(Ok(RunOutcome::Backgrounded(BackgroundedRun {
            job_id: self.job_id.clone(),
            label: self.plan.label.clone(),
            reason,
            preview,
            timeout: self.plan.timeout.info,
            text,
        })));
    }

    fn finish(&mut self, myself: &ActorRef<JobMsg>, outcome: ExecOutcome) {
        if self.result.is_some() {
            return;
        }
        // Dropping the timers aborts them.
        self.deadline = None;
        self.auto_timer = None;
        self.watchdog = None;
        tracing::trace!(target: "shellvisor::stage", "job: finished received");
        let (result, release) = build_result(
            &self.job_id,
            &self.plan,
            outcome,
            self.started.elapsed(),
            self.inline_cap,
        );
        let mut result = Box::new(result);
        result.screen = self.screen.take();
        if let Some(code) = self.pty.as_ref().map(|_| result.exit_code) {
            self.pty_state = Some(PtyState::Exited { code });
        }
        // The slot is free as soon as the run is over.
        self.slot = None;
        // A wait that takes the result is its delivery, so the completion
        // stream gets it only when nobody waits.
        self.waiters.retain(|waiter| !waiter.is_closed());
        let deliver = self.background.is_some() && !self.delivered && self.waiters.is_empty();
        // The Session must learn the shell (and the terminal slot) is free
        // before any caller, waiter or not, can send its next request.
        let _ = self.notify.send_message(JobNotice::Finished {
            job_id: self.job_id.clone(),
            release,
            deliver,
        });
        let _ = self.events.send(SessionEvent::JobFinished {
            job_id: self.job_id.clone(),
            exit_code: result.exit_code,
            timed_out: result.timed_out,
        });
        let mut waited = false;
        for waiter in self.waiters.drain(..) {
            if waiter.send(Ok(result.clone())).is_ok() {
                self.delivered = true;
                waited = true;
            }
        }
        if self.background.is_some() && !deliver && !self.delivered && !waited {
            // Every waiter left just now: the stream must have it after all.
            let _ = self.notify.send_message(JobNotice::Undelivered {
                job_id: self.job_id.clone(),
            });
        }
        if let Some(reply) = self.reply.take() {
            if reply
                .send(Ok(RunOutcome::Completed((*result).clone())))
                .is_ok()
            {
                self.delivered = true;
            }
            tracing::trace!(target: "shellvisor::stage", "job: replied");
        }
        for killer in self.kill_waiters.drain(..) {
            let _ = killer.send(Ok(()));
        }
        self.result = Some(result);
        self.evict_timer = Some(AbortOnDrop(
            myself.send_after(self.retention, || JobMsg::Evict),
        ));
    }

    /// The terminal's screen as text (empty when it cannot be had).
    async fn screen_text(&self) -> String {
        let Some(pty) = &self.pty else {
            return String::new();
        };
        match pty
            .call(
                |reply| PtyMsg::Call(PtyCall::Screen(reply)),
                Some(PREVIEW_DEADLINE),
            )
            .await
        {
            Ok(CallResult::Success(Ok(screen))) => screen.text(),
            _ => String::new(),
        }
    }

    async fn info(&self) -> JobInfo {
        let (state, exit_code, output_bytes, wall_time_ms) = match &self.result {
            Some(result) => {
                let state = if result.timed_out {
                    JobStatus::TimedOut
                } else if result.killed {
                    JobStatus::Killed
                } else if result.exit_code == Some(0) {
                    JobStatus::Completed
                } else {
                    JobStatus::Failed
                };
                (
                    state,
                    result.exit_code,
                    result.truncation.total_bytes,
                    result.wall_time_ms,
                )
            }
            None => {
                let bytes = match self
                    .sink
                    .call(SinkMsg::GetTotal, Some(PREVIEW_DEADLINE))
                    .await
                {
                    Ok(CallResult::Success(total)) => total,
                    _ => 0,
                };
                let wall = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
                (JobStatus::Running, None, bytes, wall)
            }
        };
        JobInfo {
            pty_state: self.pty_state,
            job_id: self.job_id.clone(),
            label: self.plan.label.clone(),
            state,
            background: self.background.is_some(),
            started_at_ms: self.started_at_ms,
            wall_time_ms,
            exit_code,
            output_bytes,
        }
    }
}

/// The last `max` bytes of `text`, starting at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
