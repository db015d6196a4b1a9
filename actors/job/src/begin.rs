//! A run's start: its timers, its Sink's feed and its runner.
//!
//! A run starts in two steps: [`Opening::new`] does everything that needs
//! no actor (the Sink's arguments, the `JobStarted` event, the timers), and
//! the run's actors are started only when it needs them from its start.
//! Most runs need none (a pipe run whose Sink starts with its first byte),
//! and then the whole start is synchronous: the Job's handler carries no
//! actor start in its future, which ractor moves with every message
//! (`docs/architecture.md`, "Measured costs").

use std::sync::Arc;
use std::time::Instant;
use std::time::SystemTime;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use shellvisor_actor_pty::PtyArgs;
use shellvisor_actor_pty::PtySession;
use shellvisor_actor_sink::SinkArgs;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_policy::RunPlan;
use shellvisor_process::contain::SessionContainment;
use shellvisor_protocol::JobId;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::SessionEvent;
use shellvisor_run::JobSlots;
use shellvisor_run::RunNotice;
use shellvisor_run::RunReport;
use shellvisor_run::RuntimeContext;
use shellvisor_run::SessionInit;
use shellvisor_run::SlotGuard;
use shellvisor_run::instant_after;
use tokio::sync::broadcast;

use crate::actor::Answers;
use crate::actor::Caller;
use crate::actor::JobArgs;
use crate::actor::JobStart;
use crate::actor::JobState;
use crate::actor::Kept;
use crate::actor::Runner;
use crate::actor::RunnerRef;
use crate::actor::minimizer_filter;
use crate::clock::JobClock;
use crate::delivery::Delivery;
use crate::limits::RunLimitsState;
use crate::messages::JobMsg;
use crate::messages::JobNotice;
use crate::ready::output_watch;
use crate::ready::start_readiness;

/// A run started up to its actors: its event sent and its timers armed.
#[derive(Debug)]
pub(crate) struct Opening {
    /// Everything but the actors' parts.
    rest: Rest,
    /// What runs the command.
    runner: Runner,
    /// The Sink's arguments.
    sink_args: SinkArgs,
}

/// A run started with its actors, to be made the Job's state.
#[derive(Debug)]
pub(crate) struct Opened {
    rest: Rest,
    runner: RunnerRef,
    feed: SinkFeed,
    /// Why the program could not be started on a terminal.
    pty_failure: Option<String>,
}

/// What a run's start carries from its arguments to its state.
#[derive(Debug)]
struct Rest {
    ctx: Arc<RuntimeContext>,
    job_id: JobId,
    plan: RunPlan,
    notify: DerivedActorRef<JobNotice>,
    events: broadcast::Sender<SessionEvent>,
    slots: JobSlots,
    containment: Option<SessionContainment>,
    init: Option<Arc<SessionInit>>,
    started: Instant,
    started_at_ms: u64,
    caller: Caller,
    slot: Option<SlotGuard>,
    clock: JobClock,
    run_notices: DerivedActorRef<RunNotice>,
}

impl Opening {
    /// Starts the run described by `args` up to its actors: sends its
    /// `JobStarted` event (to a listener) and arms its timers.
    pub(crate) fn new(myself: &ActorRef<JobMsg>, args: JobArgs, kept: Kept) -> Self {
        tracing::trace!(target: "shellvisor::stage", "job: pre_start");
        let started = Instant::now();
        let config = &args.ctx.config;
        let mut output = config.output.clone();
        if let Runner::Pty(_) = &args.runner {
            output.stream_throttle_ms = config.pty.stream_throttle_ms;
        }
        let minimize = minimizer_filter(&args);
        let sink_args = SinkArgs {
            job_id: args.job_id.clone(),
            config: output,
            artifact_path: args.artifact_path,
            budget: args.artifacts,
            keep_artifact: config.artifacts_dir.is_some(),
            events: args.events.clone(),
            watch: output_watch(&args.plan, myself),
            minimize,
        };
        // Built only for a listener (an event sent to none is dropped).
        if args.events.receiver_count() > 0 {
            let _ = args.events.send(SessionEvent::JobStarted {
                job_id: args.job_id.clone(),
                command: args.plan.command.clone(),
            });
        }
        let Kept {
            mut clock,
            run_notices,
        } = kept;
        let (caller, slot, auto_background) = match args.start {
            JobStart::Foreground {
                reply,
                auto_background,
            } => (Caller::Waiting(reply), None, auto_background),
            JobStart::Background { slot } => (Caller::Backgrounded, Some(slot), None),
        };
        clock.start_run(
            myself,
            args.plan.timeout.deadline.map(instant_after),
            auto_background.map(instant_after),
        );
        let started_at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self {
            rest: Rest {
                ctx: args.ctx,
                job_id: args.job_id,
                plan: args.plan,
                notify: args.notify,
                events: args.events,
                slots: args.slots,
                containment: args.containment,
                init: args.init,
                started,
                started_at_ms,
                caller,
                slot,
                clock,
                run_notices,
            },
            runner: args.runner,
            sink_args,
        }
    }

    /// The run started, when it needs no actor from its start; otherwise
    /// the opening back, for [`Opening::start_actors`]. A terminal needs
    /// its PtySession, and a Sink that prints from the start (a terminal
    /// always prints, and a silence clock runs from the start). Any other
    /// run's Sink starts with its first byte. (Boxed: that path starts
    /// actors anyway, and the common one returns less.)
    pub(crate) fn without_actors(self, myself: &ActorRef<JobMsg>) -> Result<Opened, Box<Self>> {
        let Self {
            rest,
            runner,
            sink_args,
        } = self;
        match runner {
            Runner::Shell(shell) if !sink_args.watch.watches_silence() => Ok(Opened {
                rest,
                runner: RunnerRef::Shell { shell, refusals: 0 },
                feed: SinkFeed::lazy(sink_args, myself.get_cell()),
                pty_failure: None,
            }),
            runner => Err(Box::new(Self {
                rest,
                runner,
                sink_args,
            })),
        }
    }

    /// The run started with its actors: its Sink, and for a terminal its
    /// PtySession (a failure to start that one is told in the result).
    ///
    /// # Errors
    /// When the Sink cannot be started.
    pub(crate) async fn start_actors(
        self: Box<Self>,
        myself: &ActorRef<JobMsg>,
    ) -> std::result::Result<Opened, ActorProcessingErr> {
        let Self {
            rest,
            runner,
            sink_args,
        } = *self;
        // Boxed, as every actor start on a message's path.
        let feed = Box::pin(SinkFeed::spawn(sink_args, myself.get_cell())).await?;
        tracing::trace!(target: "shellvisor::stage", "job: sink spawned");
        let mut pty_failure = None;
        let runner = match runner {
            Runner::Shell(shell) => RunnerRef::Shell { shell, refusals: 0 },
            Runner::Pty(launch) => {
                let pty_args = PtyArgs {
                    ctx: Arc::clone(&rest.ctx),
                    job_id: rest.job_id.clone(),
                    launch: *launch,
                    sink: feed.clone(),
                    reply_to: rest.run_notices.clone(),
                    events: rest.events.clone(),
                };
                let spawned = Box::pin(Actor::spawn_linked(
                    None,
                    PtySession,
                    pty_args,
                    myself.get_cell(),
                ))
                .await;
                let session = match spawned {
                    Ok((pty, _)) => Some(pty),
                    Err(err) => {
                        pty_failure = Some(err.to_string());
                        None
                    }
                };
                RunnerRef::Pty {
                    session,
                    state: PtyState::Running,
                }
            }
        };
        Ok(Opened {
            rest,
            runner,
            feed,
            pty_failure,
        })
    }
}

impl Opened {
    /// The Job's state for its `run`th run, its offers' tokens following
    /// `tokens_issued` ones; the command is sent to the runner.
    pub(crate) fn into_state(
        self,
        myself: &ActorRef<JobMsg>,
        run: u64,
        tokens_issued: u64,
    ) -> JobState {
        let Self {
            rest,
            runner,
            feed,
            pty_failure,
        } = self;
        let readiness = start_readiness(&rest.plan, myself, run);
        let limits = RunLimitsState::place(&rest.plan, rest.containment.as_ref(), &rest.job_id);
        let state = JobState {
            readiness,
            limits,
            ctx: rest.ctx,
            job_id: rest.job_id,
            plan: rest.plan,
            runner,
            feed,
            notify: rest.notify,
            events: rest.events,
            started: rest.started,
            started_at_ms: rest.started_at_ms,
            caller: rest.caller,
            slots: rest.slots,
            slot: rest.slot,
            clock: rest.clock,
            run_notices: rest.run_notices,
            watchdog: None,
            kill_sent: false,
            runner_reported: false,
            answers: Answers {
                delivery: Delivery::after(tokens_issued),
                ..Answers::default()
            },
            run,
            recorded: false,
            init: rest.init,
        };
        if let Some(reason) = pty_failure {
            tracing::warn!(job = %state.job_id, %reason, "could not start the program on a terminal");
            let _ = myself.cast(JobMsg::Runner(RunNotice::Finished(Box::new(
                RunReport::refused(format!(
                    "the program could not be started on a terminal ({reason})"
                )),
            ))));
        } else {
            state.exec(myself);
        }
        state
    }
}
