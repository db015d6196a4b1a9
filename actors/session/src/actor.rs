//! The Session actor: its arguments, its state and its message dispatch.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorId;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use ractor::SupervisionEvent;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_job::JobNotice;
use shellvisor_actor_job::JobRef;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_actor_shell::ShellNotice;
use shellvisor_process::contain::SessionContainment;
use shellvisor_protocol::Error;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::SessionId;
use shellvisor_run::ArtifactBudget;
use shellvisor_run::JobSlots;
use shellvisor_run::RuntimeContext;
use shellvisor_run::SessionInit;
use tokio::sync::broadcast;

use crate::book::JobBook;
use crate::budget::RestartBudget;
use crate::idle::IdleClock;
use crate::jobs::local_root;
use crate::messages::SessionMsg;
use crate::pool::ShellPool;
use crate::records::JobPool;
use crate::standby::StandbyClock;
use crate::waiting::WaitingRuns;

/// How long a closing session waits for its children to stop.
const CHILDREN_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The Session actor (see the crate documentation).
#[derive(Debug)]
pub struct Session;

/// What a Session needs.
#[derive(Debug)]
pub struct SessionArgs {
    /// The runtime (configuration, spawner, registry, host extensions).
    pub ctx: Arc<RuntimeContext>,
    /// The session's id.
    pub id: SessionId,
    /// The session's private directory (exists, mode 0700).
    pub dir: PathBuf,
    /// The session's artifacts directory (exists, mode 0700).
    pub artifacts_dir: PathBuf,
    /// The session's artifact bytes, inside the runtime's.
    pub artifacts: ArtifactBudget,
    /// The session's event channel.
    pub events: broadcast::Sender<SessionEvent>,
    /// The running-job caps (this session's and the runtime's).
    pub slots: JobSlots,
    /// Where the session's shells and terminal programs are contained: a
    /// cgroup or namespaces of its own (killed when the session ends).
    pub containment: Option<SessionContainment>,
    /// What every new shell runs first, and what became of it.
    pub init: Option<Arc<SessionInit>>,
}

/// A Session's state.
#[derive(Debug)]
pub struct SessionState {
    pub(crate) args: SessionArgs,
    /// The session's shells and its last known cwd and environment.
    pub(crate) shells: ShellPool<ActorRef<ShellMsg>>,
    /// The session's jobs and its completion stream.
    pub(crate) jobs: JobBook<JobRef>,
    /// Idle Job actors for the next runs, and when records expire.
    pub(crate) job_pool: JobPool,
    /// Failures of the primary shell.
    pub(crate) budget: RestartBudget,
    /// Asks for the standby once the primary has been held long enough.
    pub(crate) standby: StandbyClock,
    /// When the session was last called; closes it when idle.
    pub(crate) idle: IdleClock,
    /// A notice for the next run: the session's directory vanished and its
    /// new shell started elsewhere.
    pub(crate) relocated: Option<String>,
    /// Where its Jobs send their notices (one address, made once).
    pub(crate) job_notices: DerivedActorRef<JobNotice>,
    /// Runs waiting for a retiring shell to go (the shell limit).
    pub(crate) waiting: WaitingRuns,
    /// The session's `local://` root: a directory in its artifacts
    /// directory, which does not change while the session lives (made once,
    /// not for every run's plan).
    pub(crate) local_root: PathBuf,
}

impl Actor for Session {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> std::result::Result<SessionState, ActorProcessingErr> {
        let restart = &args.ctx.config.restart;
        Ok(SessionState {
            shells: ShellPool::new(args.ctx.initial_cwd.clone()),
            jobs: JobBook::default(),
            job_pool: JobPool::default(),
            budget: RestartBudget::new(
                restart.max_restarts,
                Duration::from_secs(restart.window_secs),
            ),
            standby: StandbyClock::default(),
            idle: IdleClock::new(args.ctx.config.sessions.idle_close()),
            relocated: None,
            job_notices: myself.get_derived(),
            waiting: WaitingRuns::default(),
            local_root: local_root(&args.artifacts_dir),
            args,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<SessionMsg>,
        state: &mut SessionState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        // Start the primary shell now so the first command finds it ready.
        if let Err(err) = state.start_primary(&myself).await {
            tracing::warn!(session = %state.args.id, %err, "could not start the session's shell");
        }
        state.idle.arm(&myself);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        message: SessionMsg,
        state: &mut SessionState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        if message.is_call() {
            state.idle.touch();
        }
        match message {
            #[cfg(feature = "chaos")]
            SessionMsg::Panic => panic!("chaos: a panic injected into a Session handler"),
            SessionMsg::IdleCheck => state.idle_check(&myself).await,
            SessionMsg::Run {
                request,
                reply,
                started,
            } => state.run(&myself, request, reply, started).await,
            SessionMsg::ReadOutput {
                job_id,
                offset,
                max,
                reply,
            } => state.forward(&job_id, reply, |reply| JobMsg::ReadOutput {
                offset,
                max,
                reply,
            }),
            SessionMsg::JobInfo { job_id, reply } => state.forward(&job_id, reply, JobMsg::GetInfo),
            SessionMsg::Wait { job_id, reply } => state.forward(&job_id, reply, JobMsg::Wait),
            SessionMsg::Kill { job_id, reply } => state.forward(&job_id, reply, JobMsg::Kill),
            SessionMsg::Pty { job_id, call } => match state.jobs.get(&job_id) {
                Some(job) => {
                    if let Err(JobMsg::PtyCall(call)) = job.send(JobMsg::PtyCall(call)) {
                        call.refuse(Error::JobNotFound {
                            id: job_id.to_string(),
                        });
                    }
                }
                None => call.refuse(Error::JobNotFound {
                    id: job_id.to_string(),
                }),
            },
            SessionMsg::ListJobs { query, reply } => state.list_jobs(query, reply),
            SessionMsg::NextCompletion(reply) => {
                state.jobs.add_waiter(reply);
                state.serve_completions().await;
            }
            SessionMsg::Job(JobNotice::ShellRefused { job_id }) => {
                state.shell_refused(&myself, &job_id).await;
            }
            SessionMsg::Job(JobNotice::Undelivered { job_id }) => {
                // Given back: it finished before anything queued since.
                state.jobs.requeue_first(job_id);
                state.serve_completions().await;
            }
            SessionMsg::Job(JobNotice::Backgrounded { job_id, cwd }) => {
                state.detach_primary(&myself, &job_id, cwd).await;
            }
            SessionMsg::Job(JobNotice::Finished {
                job_id,
                release,
                deliver,
                record,
                answer,
            }) => {
                state
                    .job_finished(&myself, &job_id, release, deliver, record, answer)
                    .await;
                // Its shell may be the one a waiting run can take.
                state.serve_waiting(&myself).await;
            }
            SessionMsg::ShellWaitOver => state.shell_wait_over(&myself).await,
            SessionMsg::ExpireRecords => state.expire_records(&myself),
            SessionMsg::PrepareStandby => {
                if let Some(job_id) = state.standby.fired(&myself) {
                    state.prepare_standby(&myself, &job_id).await;
                }
            }
            SessionMsg::Shell(ShellNotice::Ended {
                shell,
                exit,
                during_run,
                killed,
            }) => {
                state
                    .shell_ended(&myself, shell, exit, during_run, killed)
                    .await;
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SessionMsg>,
        event: SupervisionEvent,
        state: &mut SessionState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let reason = reason.unwrap_or_else(|| "stopped".to_owned());
                state.child_ended(&myself, cell.get_id(), reason).await;
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                state
                    .child_ended(&myself, cell.get_id(), err.to_string())
                    .await;
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<SessionMsg>,
        _state: &mut SessionState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        // Stop shells gracefully (TERM, grace, KILL) before ractor kills the rest.
        myself
            .stop_children_and_wait(
                Some("session closed".to_owned()),
                Some(CHILDREN_STOP_TIMEOUT),
            )
            .await;
        Ok(())
    }
}

impl SessionState {
    /// A child actor ended: a shell (the job holding it learns it is gone; a
    /// primary is replaced, charged to the budget) or a job (the shell it
    /// still held is in an unknown state and is given back as such).
    async fn child_ended(&mut self, myself: &ActorRef<SessionMsg>, id: ActorId, reason: String) {
        if let Some(stopped) = self.shells.forget(&id) {
            if let Some(job) = stopped.holder.as_ref().and_then(|job| self.jobs.get(job)) {
                let _ = job.send(JobMsg::ShellGone {
                    reason: reason.clone(),
                });
            }
            if stopped.was_primary {
                self.primary_failed(myself, &reason).await;
            }
            // One shell fewer: a run waiting for one may start.
            self.serve_waiting(myself).await;
            return;
        }
        self.job_pool.forget(&id);
        if let Some(job_id) = self.jobs.forget(&id) {
            self.give_back_shell(myself, &job_id, None).await;
        }
    }
}
