//! The Job actor: its arguments, its state and its message dispatch.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use ractor::MessagingErr;
use ractor::RpcReplyPort;
use ractor::SupervisionEvent;
use shellvisor_actor_pty::PtyLaunch;
use shellvisor_actor_pty::PtyMsg;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_actor_sink::ArtifactBudget;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_policy::RunPlan;
use shellvisor_process::contain::SessionContainment;
use shellvisor_protocol::BackgroundReason;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::SessionEvent;
use shellvisor_run::JobSlots;
use shellvisor_run::KillReason;
use shellvisor_run::RunEnd;
use shellvisor_run::RunNotice;
use shellvisor_run::RunReport;
use shellvisor_run::RuntimeContext;
use shellvisor_run::SessionInit;
use shellvisor_run::SlotGuard;
use shellvisor_run::Timer;
use shellvisor_run::instant_after;
use tokio::sync::broadcast;

use crate::begin::Opening;
use crate::clock::JobClock;
use crate::delivery::Delivery;
use crate::limits::RunLimitsState;
use crate::messages::JobMsg;
use crate::messages::JobNotice;
use crate::offer::Offer;
use crate::ready::Readiness;

/// How many times a run refused by a dead shell is moved to a fresh one.
const MAX_SHELL_RETRIES: u32 = 2;

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
        auto_background: Option<std::time::Duration>,
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

/// What a Job needs.
#[derive(Debug)]
pub struct JobArgs {
    /// The runtime (its configuration: output, retention, kill grace).
    pub ctx: Arc<RuntimeContext>,
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
    /// Where the artifact goes.
    pub artifact_path: PathBuf,
    /// The session's artifact bytes the Sink charges.
    pub artifacts: ArtifactBudget,
    /// The session's cgroup or namespaces (where a run's limits go).
    pub containment: Option<SessionContainment>,
    /// The session's init: a failure of it is told in the next result.
    pub init: Option<Arc<SessionInit>>,
}

/// The minimizer's filter for a run: with the minimizer on, a pipe-mode run
/// of one simple command (its program's filter, or the generic rules).
pub(crate) fn minimizer_filter(args: &JobArgs) -> Option<Arc<shellvisor_minimizer::Filter>> {
    let filters = args.ctx.minimizer.as_ref()?;
    if matches!(args.runner, Runner::Pty(_)) {
        return None;
    }
    let words = shellvisor_policy::simple_command_words(&args.plan.command)?;
    filters.select(&words)
}

/// The runner a started job drives.
#[derive(Debug)]
pub(crate) enum RunnerRef {
    /// A pipe shell, and how often it refused the run before anything ran.
    Shell {
        shell: ActorRef<ShellMsg>,
        refusals: u32,
    },
    /// A terminal run: its PtySession (`None` once it stopped or if it
    /// could not start) and the program's last known state.
    Pty {
        session: Option<ActorRef<PtyMsg>>,
        state: PtyState,
    },
}

/// Who has, or gets, the run's answer.
#[derive(Debug)]
pub(crate) enum Caller {
    /// A caller waits for the result (a foreground run).
    Waiting(RpcReplyPort<Result<RunOutcome>>),
    /// The caller was answered with a background job (or asked for one):
    /// the result goes to a wait or the completion stream.
    Backgrounded,
    /// The foreground caller has its result (or left).
    Answered,
}

/// What a Job actor keeps from one run to the next.
#[derive(Debug)]
pub(crate) struct Kept {
    /// Its one timer and what it is for.
    pub(crate) clock: JobClock,
    /// Where its runners report (one address, made once).
    pub(crate) run_notices: DerivedActorRef<RunNotice>,
}

/// The finished run's result and who has had it.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    pub(crate) result: Option<Arc<RunResult>>,
    /// Offers of the result and their confirmations.
    pub(crate) delivery: Delivery,
    /// Waits for the result.
    pub(crate) waiters: Vec<RpcReplyPort<Result<Offer>>>,
    /// Kills waiting for the run to end.
    pub(crate) kill_waiters: Vec<RpcReplyPort<Result<()>>>,
}

/// A Job's state.
#[derive(Debug)]
pub struct JobState {
    pub(crate) ctx: Arc<RuntimeContext>,
    pub(crate) job_id: JobId,
    pub(crate) plan: RunPlan,
    pub(crate) runner: RunnerRef,
    /// The run's output: its Sink, started with the first byte.
    pub(crate) feed: SinkFeed,
    pub(crate) notify: DerivedActorRef<JobNotice>,
    pub(crate) events: broadcast::Sender<SessionEvent>,
    pub(crate) started: Instant,
    pub(crate) started_at_ms: u64,
    pub(crate) caller: Caller,
    pub(crate) slots: JobSlots,
    /// The running-job slot, held while the job runs in the background.
    pub(crate) slot: Option<SlotGuard>,
    /// The deadline, auto-background and retention; kept across runs.
    pub(crate) clock: JobClock,
    /// Where the runner reports; kept across runs.
    pub(crate) run_notices: DerivedActorRef<RunNotice>,
    /// Fires if the runner does not report within the grace after a kill
    /// (aborted when dropped).
    pub(crate) watchdog: Option<Timer<JobMsg>>,
    /// Set once the runner was asked to kill the run.
    pub(crate) kill_sent: bool,
    /// The run ended with its runner's own report. A run ended otherwise
    /// (its Shell actor gone, or silent after a kill) may still be reported
    /// by the runner's I/O task later, so its actor must not serve another
    /// run: that late report would end the other run, with this one's
    /// output.
    pub(crate) runner_reported: bool,
    pub(crate) answers: Answers,
    /// Whether the run's `wait_for` held.
    pub(crate) readiness: Readiness,
    /// The run's resource limits, if it has any.
    pub(crate) limits: Option<RunLimitsState>,
    /// The session's init (its failure is told once, in a result).
    pub(crate) init: Option<Arc<SessionInit>>,
    /// Which of the actor's runs this is (1 for its first): its timers
    /// carry it, so one that fired as the run was recorded is ignored.
    pub(crate) run: u64,
    /// The run is over and its record went to the Session: the actor
    /// waits for the session's next run (and answers requests about this
    /// one that were sent before the Session had the record).
    pub(crate) recorded: bool,
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
        let kept = Kept {
            clock: JobClock::default(),
            run_notices: myself.get_derived(),
        };
        JobState::begin(&myself, args, 1, 0, kept).await
    }

    async fn handle(
        &self,
        myself: ActorRef<JobMsg>,
        message: JobMsg,
        state: &mut JobState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match message {
            #[cfg(feature = "chaos")]
            JobMsg::Panic => panic!("chaos: a panic injected into a Job handler"),
            JobMsg::Runner(RunNotice::Finished(report)) => {
                tracing::trace!(target: "shellvisor::stage", "job: report handled");
                state.runner_finished(&myself, *report)
            }
            JobMsg::Output(notice) => state.output_notice(&myself, notice).await,
            JobMsg::Begin(args) => {
                if !state.recorded {
                    // Only a Job whose run was recorded is lent a new one:
                    // dropping the arguments tells its caller (`actor_gone`).
                    tracing::error!(job = %state.job_id, "a run was sent to a busy job");
                    return Ok(());
                }
                let issued = state.answers.delivery.issued();
                let kept = Kept {
                    clock: std::mem::take(&mut state.clock),
                    run_notices: state.run_notices.clone(),
                };
                let run = state.run + 1;
                let opened = match Opening::new(&myself, *args, kept).without_actors(&myself) {
                    Ok(opened) => opened,
                    // Boxed: ractor moves this handler's future with every
                    // message, and a start of actors would double its size
                    // for all (docs/architecture.md, "Measured costs").
                    Err(opening) => Box::pin(opening.start_actors(&myself)).await?,
                };
                *state = opened.into_state(&myself, run, issued);
            }
            JobMsg::ReadyPolled { run, .. } | JobMsg::Unresponsive(run) if run != state.run => {}
            JobMsg::ReadyPolled {
                already_at_start, ..
            } => {
                let notice = already_at_start.then(|| {
                    "It already held when the command started (another process may have made it).".to_owned()
                });
                state.ready(notice).await;
            }
            JobMsg::Runner(RunNotice::PtyState(pty_state)) => {
                if state.answers.result.is_none()
                    && let RunnerRef::Pty { state: known, .. } = &mut state.runner
                {
                    *known = pty_state;
                    if pty_state == PtyState::AwaitingInput {
                        state.background_now(BackgroundReason::AwaitingInput).await;
                    }
                }
            }
            JobMsg::PtyCall(call) => match &state.runner {
                RunnerRef::Pty {
                    session: Some(pty), ..
                } => {
                    if let Err(MessagingErr::SendErr(PtyMsg::Call(call))) =
                        pty.cast(PtyMsg::Call(call))
                    {
                        call.refuse(Error::InputRejected {
                            reason: "the terminal session has stopped".to_owned(),
                        });
                    }
                }
                RunnerRef::Pty { session: None, .. } => call.refuse(Error::InputRejected {
                    reason: "the terminal session has stopped".to_owned(),
                }),
                RunnerRef::Shell { .. } => call.refuse(Error::NotInteractive {
                    id: state.job_id.to_string(),
                }),
            },
            JobMsg::UseShell(shell) => {
                if state.answers.result.is_none()
                    && let RunnerRef::Shell { shell: current, .. } = &mut state.runner
                {
                    *current = shell;
                    state.exec(&myself);
                }
            }
            JobMsg::ShellGone { reason } => state.finish(
                &myself,
                RunReport::without_output(RunEnd::ShellLost { reason }),
            ),
            JobMsg::ReadOutput { offset, max, reply } => {
                state.feed.read(offset, max, reply);
            }
            JobMsg::GetInfo(reply) => {
                let info = state.info().await;
                let _ = reply.send(Ok(info));
            }
            JobMsg::Wait(reply) => state.wait(&myself, reply),
            JobMsg::Claim(reply) => state.claim(&myself, reply),
            JobMsg::Confirm(token) => state.confirm(token),
            JobMsg::GiveBack(token) => state.give_back(token),
            JobMsg::Kill(reply) => {
                if state.answers.result.is_some() {
                    let _ = reply.send(Ok(()));
                } else {
                    state.answers.kill_waiters.push(reply);
                    state.kill(&myself, KillReason::Cancelled);
                }
            }
            JobMsg::ClockFired => state.clock_fired(&myself).await,
            JobMsg::Unresponsive(_) => {
                state.watchdog = None;
                if state.answers.result.is_none() {
                    state.finish(
                        &myself,
                        RunReport::without_output(RunEnd::ShellLost {
                            reason: "the shell did not respond to being killed; output may be incomplete"
                                .to_owned(),
                        }),
                    );
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
        let RunnerRef::Pty { session, .. } = &mut state.runner else {
            tracing::debug!(job = %state.job_id, %reason, "output sink stopped");
            return Ok(());
        };
        if session
            .as_ref()
            .is_none_or(|pty| pty.get_id() != cell.get_id())
        {
            tracing::debug!(job = %state.job_id, %reason, "output sink stopped");
            return Ok(());
        }
        *session = None;
        if state.answers.result.is_none() {
            tracing::warn!(job = %state.job_id, %reason, "terminal session stopped during the run");
            state.finish(
                &myself,
                RunReport::without_output(RunEnd::ShellLost {
                    reason: format!("the terminal session stopped ({reason})"),
                }),
            );
        }
        Ok(())
    }
}

impl JobState {
    /// A run's state, its timers armed and its command sent: the actor's
    /// `run`th, its offers' tokens following `tokens_issued` ones.
    async fn begin(
        myself: &ActorRef<JobMsg>,
        args: JobArgs,
        run: u64,
        tokens_issued: u64,
        kept: Kept,
    ) -> std::result::Result<JobState, ActorProcessingErr> {
        let opened = match Opening::new(myself, args, kept).without_actors(myself) {
            Ok(opened) => opened,
            Err(opening) => opening.start_actors(myself).await?,
        };
        Ok(opened.into_state(myself, run, tokens_issued))
    }

    /// The runner's report. A shell that refused the run before anything
    /// ran (it had just died) is replaced, at most [`MAX_SHELL_RETRIES`]
    /// times; anything else ends the run.
    fn runner_finished(&mut self, myself: &ActorRef<JobMsg>, report: RunReport) {
        if let (RunEnd::Refused { reason }, RunnerRef::Shell { refusals, .. }) =
            (&report.end, &mut self.runner)
            && self.answers.result.is_none()
            && *refusals < MAX_SHELL_RETRIES
        {
            tracing::debug!(job = %self.job_id, "shell refused the run; asking for another");
            *refusals += 1;
            // Only exported variables and the directory carry over: say so.
            self.plan.notices.push(format!(
                "The session's shell could not take this command ({reason}); it ran in a fresh shell with the last \
                 known working directory and exported variables."
            ));
            let _ = self.notify.send_message(JobNotice::ShellRefused {
                job_id: self.job_id.clone(),
            });
            return;
        }
        // The runner's report ends the run: the runner is done with it and
        // sends nothing more about it (see `recordable`).
        self.runner_reported = self.answers.result.is_none();
        self.finish(myself, report);
    }

    /// Keeps the finished job for the retention period.
    pub(crate) fn arm_eviction(&mut self, myself: &ActorRef<JobMsg>) {
        let retention = std::time::Duration::from_secs(self.ctx.config.jobs.retention_secs);
        self.clock.evict_at(myself, instant_after(retention));
    }

    /// The clock fired: what is due happens (the deadline kills a run still
    /// going, the move to the background answers a caller still waiting,
    /// the retention's end lets the job go unless its result still waits
    /// for a delivery).
    async fn clock_fired(&mut self, myself: &ActorRef<JobMsg>) {
        let due = self.clock.fired(myself);
        if due.deadline && self.answers.result.is_none() {
            self.kill(myself, KillReason::Timeout);
        }
        if due.auto_background {
            self.background_now(BackgroundReason::Timer).await;
        }
        if due.evict {
            if matches!(self.caller, Caller::Backgrounded) && !self.answers.delivery.is_delivered()
            {
                // Its result has not been delivered yet: keep it.
                self.arm_eviction(myself);
            } else {
                myself.stop(Some("retention elapsed".to_owned()));
            }
        }
    }
}
