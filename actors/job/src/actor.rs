//! The Job actor.

use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use ractor::MessagingErr;
use ractor::RpcReplyPort;
use ractor::SupervisionEvent;
use ractor::concurrency::JoinHandle;
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
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::OutputConfig;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::SessionEvent;
use tokio::sync::broadcast;

use crate::messages::JobMsg;
use crate::messages::JobNotice;
use crate::messages::RunPlan;
use crate::result::build_result;

/// Extra time, past the kill grace, that a Shell may take to report a killed run.
const UNRESPONSIVE_AFTER_KILL: Duration = Duration::from_secs(5);
/// How many times a run refused by a dead shell is moved to a fresh one.
const MAX_SHELL_RETRIES: u32 = 2;

type Timer = JoinHandle<std::result::Result<(), MessagingErr<JobMsg>>>;

/// The Job actor (see the crate documentation).
#[derive(Debug)]
pub struct Job;

/// What a Job needs.
#[derive(Debug)]
pub struct JobArgs {
    /// The run's id.
    pub job_id: JobId,
    /// What to run.
    pub plan: RunPlan,
    /// The shell lent for this run.
    pub shell: ActorRef<ShellMsg>,
    /// The caller waiting for the result.
    pub reply: Option<RpcReplyPort<Result<RunOutcome>>>,
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
}

/// A Job's state.
#[derive(Debug)]
pub struct JobState {
    job_id: JobId,
    plan: RunPlan,
    shell: ActorRef<ShellMsg>,
    sink: ActorRef<SinkMsg>,
    feed: SinkFeed,
    shell_retries: u32,
    reply: Option<RpcReplyPort<Result<RunOutcome>>>,
    notify: DerivedActorRef<JobNotice>,
    events: broadcast::Sender<SessionEvent>,
    started: Instant,
    deadline: Option<Timer>,
    watchdog: Option<Timer>,
    kill_sent: bool,
    result: Option<RunResult>,
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
        let started = Instant::now();
        let (sink, _) = Actor::spawn_linked(
            None,
            Sink,
            SinkArgs {
                job_id: args.job_id.clone(),
                config: args.output,
                artifact_path: args.artifact_path,
                events: args.events.clone(),
            },
            myself.get_cell(),
        )
        .await?;
        let _ = args.events.send(SessionEvent::JobStarted {
            job_id: args.job_id.clone(),
            command: args.plan.command.clone(),
        });
        let deadline = args
            .plan
            .timeout
            .deadline
            .map(|after| myself.send_after(after, || JobMsg::DeadlineElapsed));
        let state = JobState {
            job_id: args.job_id,
            plan: args.plan,
            shell: args.shell,
            feed: SinkFeed::new(sink.clone()),
            shell_retries: 0,
            sink,
            reply: args.reply,
            notify: args.notify,
            events: args.events,
            started,
            deadline,
            watchdog: None,
            kill_sent: false,
            result: None,
            retention: args.retention,
            kill_grace: args.kill_grace,
        };
        state.exec(&myself);
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
                if refused && state.result.is_none() && state.shell_retries < MAX_SHELL_RETRIES {
                    tracing::debug!(job = %state.job_id, "shell refused the run; asking for another");
                    state.shell_retries += 1;
                    let _ = state.notify.send_message(JobNotice::ShellRefused {
                        job_id: state.job_id.clone(),
                    });
                } else {
                    state.finish(&myself, *outcome);
                }
            }
            JobMsg::UseShell(shell) => {
                if state.result.is_none() {
                    state.shell = shell;
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
                if let Err(err) =
                    state
                        .sink
                        .cast(shellvisor_actor_sink::SinkMsg::Read { offset, max, reply })
                    && let MessagingErr::SendErr(shellvisor_actor_sink::SinkMsg::Read {
                        reply, ..
                    }) = err
                {
                    let _ = reply.send(Err(Error::OutputUnavailable {
                        reason: "the output buffer of this job stopped".to_owned(),
                    }));
                }
            }
            JobMsg::DeadlineElapsed => {
                state.deadline = None;
                if state.result.is_none() && !state.kill_sent {
                    state.kill_sent = true;
                    if state
                        .shell
                        .cast(ShellMsg::Kill(KillReason::Timeout))
                        .is_err()
                    {
                        let _ = myself.cast(JobMsg::ShellGone {
                            reason: "the shell stopped before its deadline".to_owned(),
                        });
                    }
                    let wait = state.kill_grace + UNRESPONSIVE_AFTER_KILL;
                    state.watchdog = Some(myself.send_after(wait, || JobMsg::Unresponsive));
                }
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
            JobMsg::Evict => myself.stop(Some("retention elapsed".to_owned())),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<JobMsg>,
        event: SupervisionEvent,
        _state: &mut JobState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        // The only child is the Sink. If it dies the run goes on; its result
        // says the output could not be collected. Never stop because of it.
        match event {
            SupervisionEvent::ActorFailed(_, err) => tracing::warn!(%err, "output sink failed"),
            SupervisionEvent::ActorTerminated(_, _, reason) => {
                tracing::debug!(?reason, "output sink stopped");
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}

impl JobState {
    fn exec(&self, myself: &ActorRef<JobMsg>) {
        let reply_to: DerivedActorRef<ShellEvent> = myself.get_derived();
        let request = ExecRequest {
            command: self.plan.command.clone(),
            cwd: self.plan.cwd.clone(),
            env: self.plan.env.clone(),
            sink: self.feed.clone(),
            reply_to,
        };
        if self.shell.cast(ShellMsg::Exec(request)).is_err() {
            let _ = myself.cast(JobMsg::Shell(ShellEvent::Finished(Box::new(ExecOutcome {
                end: RunEnd::Refused {
                    reason: "the shell had already stopped".to_owned(),
                },
                output: None,
            }))));
        }
    }

    fn finish(&mut self, myself: &ActorRef<JobMsg>, outcome: ExecOutcome) {
        if self.result.is_some() {
            return;
        }
        for timer in [self.deadline.take(), self.watchdog.take()]
            .into_iter()
            .flatten()
        {
            timer.abort();
        }
        let (result, release) =
            build_result(&self.job_id, &self.plan, outcome, self.started.elapsed());
        // The Session must learn the shell is free before the caller can send
        // its next command.
        let _ = self.notify.send_message(JobNotice::ShellReleased {
            job_id: self.job_id.clone(),
            release,
        });
        let _ = self.events.send(SessionEvent::JobFinished {
            job_id: self.job_id.clone(),
            exit_code: result.exit_code,
            timed_out: result.timed_out,
        });
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(Ok(RunOutcome::Completed(result.clone())));
        }
        self.result = Some(result);
        myself.send_after(self.retention, || JobMsg::Evict);
    }
}
