//! The Session actor: its state and its message dispatch.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use bytes::Bytes;
use ractor::Actor;
use ractor::ActorId;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::RpcReplyPort;
use ractor::SupervisionEvent;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_job::JobNotice;
use shellvisor_actor_job::JobSlots;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_actor_shell::ShellNotice;
use shellvisor_policy::Interceptor;
use shellvisor_policy::UrlResolver;
use shellvisor_process::EnvRecord;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::Spawner;
use shellvisor_process::contain::SessionCgroup;
use shellvisor_process::pty::PtyBackend;
use shellvisor_protocol::Config;
use shellvisor_protocol::JobId;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::SessionId;
use tokio::sync::broadcast;
use tokio::sync::watch;

use crate::budget::RestartBudget;
use crate::messages::SessionMsg;
use crate::standby::Standby;
use crate::standby::StandbyTimer;

/// How long a closing session waits for its children to stop.
const CHILDREN_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The Session actor (see the crate documentation).
#[derive(Debug)]
pub struct Session;

/// What a Session needs.
#[derive(Debug)]
pub struct SessionArgs {
    /// The session's id.
    pub id: SessionId,
    /// The runtime configuration.
    pub config: Arc<Config>,
    /// The runtime's spawner thread.
    pub spawner: Arc<Spawner>,
    /// The runtime's registry of live process groups.
    pub registry: Arc<ProcessRegistry>,
    /// The session's private directory (exists, mode 0700).
    pub dir: PathBuf,
    /// The session's artifacts directory (exists, mode 0700).
    pub artifacts_dir: PathBuf,
    /// The environment a fresh shell starts with.
    pub base_env: Arc<Vec<(OsString, OsString)>>,
    /// The home directory, for `~` in `cwd`.
    pub home: Option<PathBuf>,
    /// The first working directory.
    pub initial_cwd: PathBuf,
    /// The session's event channel.
    pub events: broadcast::Sender<SessionEvent>,
    /// The running-job caps (this session's and the runtime's).
    pub slots: JobSlots,
    /// The interceptor, when it is enabled.
    pub interceptor: Option<Arc<Interceptor>>,
    /// The host's resolvers for internal URL schemes.
    pub resolvers: Arc<Vec<Arc<dyn UrlResolver>>>,
    /// Where pseudo-terminals come from.
    pub pty_backend: Arc<dyn PtyBackend>,
    /// The session's cgroup, which its shells and terminal programs join
    /// (killed when the session ends).
    pub cgroup: Option<Arc<SessionCgroup>>,
}

/// A Session's state.
#[derive(Debug)]
pub struct SessionState {
    pub(crate) args: SessionArgs,
    /// Last known working directory of the primary shell.
    pub(crate) cwd: PathBuf,
    /// Last known `export -p` of a primary shell (`None`: the base environment).
    pub(crate) env_snapshot: Option<Bytes>,
    /// The current primary's environment records.
    pub(crate) primary_env: Option<watch::Receiver<EnvRecord>>,
    /// Nonce of the primary's last completed run (its environment record is
    /// the one to seed from).
    pub(crate) last_run_nonce: Option<String>,
    pub(crate) primary: Option<ActorRef<ShellMsg>>,
    pub(crate) primary_holder: Option<JobId>,
    pub(crate) shells: HashMap<ActorId, ShellEntry>,
    pub(crate) jobs: HashMap<JobId, JobEntry>,
    pub(crate) job_ids: HashMap<ActorId, JobId>,
    /// Jobs in the order they started (for listing).
    pub(crate) job_order: VecDeque<JobId>,
    /// Finished jobs, oldest first (for eviction).
    pub(crate) finished: VecDeque<JobId>,
    /// Finished background jobs whose result has not been taken yet.
    pub(crate) completions: VecDeque<JobId>,
    /// Callers waiting for the next completion.
    pub(crate) completion_waiters: VecDeque<RpcReplyPort<Box<RunResult>>>,
    pub(crate) budget: RestartBudget,
    /// Why the primary shell last failed (for `shell_unavailable`).
    pub(crate) last_failure: Option<String>,
    /// Who wants the job id of the run being admitted (set only while a
    /// `Run` message is handled).
    pub(crate) started: Option<tokio::sync::oneshot::Sender<JobId>>,
    pub(crate) unavailable_until: Option<Instant>,
    /// A shell with the session's state, ready to become the primary while
    /// the primary is held by a long foreground run.
    pub(crate) standby: Option<Standby>,
    /// Asks for the standby once the primary has been held long enough.
    pub(crate) standby_timer: Option<StandbyTimer>,
    /// `config.jobs.background_hint`, shared with every Job (no copy per run).
    pub(crate) background_hint: Arc<str>,
}

/// A shell of the session.
#[derive(Debug)]
pub(crate) struct ShellEntry {
    pub(crate) actor: ActorRef<ShellMsg>,
    pub(crate) role: ShellRole,
    pub(crate) holder: Option<JobId>,
}

/// What a shell is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShellRole {
    /// The session's persistent shell.
    Primary,
    /// A fresh shell for one overlapping or async call.
    Isolated,
    /// A former primary taken along by a job that went to the background.
    Detached,
    /// Ready to replace the primary while a long run holds it.
    Standby,
    /// No longer used; stopping.
    Retired,
}

/// A job of the session.
#[derive(Debug)]
pub(crate) struct JobEntry {
    pub(crate) actor: ActorRef<JobMsg>,
    /// The shell it holds, until it finishes.
    pub(crate) shell: Option<ActorId>,
    /// Whether it runs on a terminal and has not finished (the PTY cap).
    pub(crate) pty_running: bool,
}

impl Actor for Session {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> std::result::Result<SessionState, ActorProcessingErr> {
        let restart = &args.config.restart;
        let background_hint = Arc::from(args.config.jobs.background_hint.as_str());
        Ok(SessionState {
            cwd: args.initial_cwd.clone(),
            budget: RestartBudget::new(
                restart.max_restarts,
                Duration::from_secs(restart.window_secs),
            ),
            args,
            env_snapshot: None,
            primary_env: None,
            last_run_nonce: None,
            primary: None,
            primary_holder: None,
            shells: HashMap::new(),
            jobs: HashMap::new(),
            job_ids: HashMap::new(),
            job_order: VecDeque::new(),
            finished: VecDeque::new(),
            completions: VecDeque::new(),
            completion_waiters: VecDeque::new(),
            unavailable_until: None,
            last_failure: None,
            started: None,
            standby: None,
            standby_timer: None,
            background_hint,
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
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        message: SessionMsg,
        state: &mut SessionState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match message {
            SessionMsg::Run {
                request,
                reply,
                started,
            } => {
                state.started = started;
                state.run(&myself, request, reply).await;
                state.started = None;
            }
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
                    if let Err(ractor::MessagingErr::SendErr(JobMsg::PtyCall(call))) =
                        job.actor.cast(JobMsg::PtyCall(call))
                    {
                        call.refuse(shellvisor_protocol::Error::JobNotFound {
                            id: job_id.to_string(),
                        });
                    }
                }
                None => call.refuse(shellvisor_protocol::Error::JobNotFound {
                    id: job_id.to_string(),
                }),
            },
            SessionMsg::ListJobs(reply) => state.list_jobs(reply),
            SessionMsg::NextCompletion(reply) => {
                state.completion_waiters.push_back(reply);
                state.serve_completions().await;
            }
            SessionMsg::Job(JobNotice::ShellRefused { job_id }) => {
                state.shell_refused(&myself, &job_id).await;
            }
            SessionMsg::Job(JobNotice::Undelivered { job_id }) => {
                state.completions.push_back(job_id);
                state.serve_completions().await;
            }
            SessionMsg::Job(JobNotice::Backgrounded { job_id }) => {
                state.job_backgrounded(&myself, &job_id).await;
            }
            SessionMsg::Job(JobNotice::Finished {
                job_id,
                release,
                deliver,
            }) => {
                state.job_finished(&myself, &job_id, release, deliver).await;
            }
            SessionMsg::PrepareStandby { job_id } => {
                state.prepare_standby(&myself, &job_id).await;
            }
            SessionMsg::Shell(ShellNotice::Ended {
                shell,
                exit,
                during_run,
            }) => state.shell_ended(&myself, shell, exit, during_run).await,
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
    /// A child actor ended: a shell (its job learns it is gone; a primary is
    /// replaced, charged to the budget) or a job (the shell it still held is
    /// in an unknown state and is released as such).
    async fn child_ended(&mut self, myself: &ActorRef<SessionMsg>, id: ActorId, reason: String) {
        if let Some(entry) = self.shells.remove(&id) {
            self.standby_ended(&id);
            if let Some(job) = entry
                .holder
                .as_ref()
                .and_then(|job_id| self.jobs.get(job_id))
            {
                let _ = job.actor.cast(JobMsg::ShellGone {
                    reason: reason.clone(),
                });
            }
            if entry.role == ShellRole::Primary && self.is_primary(id) {
                self.primary = None;
                self.primary_holder = None;
                self.primary_failed(myself, &reason).await;
            }
            return;
        }
        if let Some(job_id) = self.job_ids.remove(&id) {
            let entry = self.jobs.remove(&job_id);
            self.finished.retain(|j| j != &job_id);
            self.job_order.retain(|j| j != &job_id);
            self.completions.retain(|j| j != &job_id);
            if let Some(shell_id) = entry.and_then(|job| job.shell) {
                self.release_shell(myself, shell_id, None).await;
            }
        }
    }

    /// Whether `shell` is the session's current primary shell.
    pub(crate) fn is_primary(&self, shell: ActorId) -> bool {
        self.primary.as_ref().is_some_and(|p| p.get_id() == shell)
    }
}
