//! The Session actor.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use bytes::Bytes;
use ractor::Actor;
use ractor::ActorCell;
use ractor::ActorId;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::RpcReplyPort;
use ractor::SupervisionEvent;
use shellvisor_actor_job::Job;
use shellvisor_actor_job::JobArgs;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_job::JobNotice;
use shellvisor_actor_job::RunPlan;
use shellvisor_actor_job::ShellRelease;
use shellvisor_actor_shell::KillReason;
use shellvisor_actor_shell::Shell;
use shellvisor_actor_shell::ShellArgs;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_actor_shell::ShellNotice;
use shellvisor_policy::is_reserved_env_name;
use shellvisor_policy::resolve_cwd;
use shellvisor_policy::resolve_timeout;
use shellvisor_policy::validate_command;
use shellvisor_policy::validate_env;
use shellvisor_process::EnvRecord;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::ShellSpawnSpec;
use shellvisor_process::Spawner;
use shellvisor_process::parse_exported_env;
use shellvisor_protocol::Config;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::SessionId;
use tokio::sync::broadcast;
use tokio::sync::watch;

use crate::budget::RestartBudget;
use crate::messages::SessionMsg;

/// Notice added when a PTY is requested but cannot be provided.
const PTY_UNAVAILABLE_NOTICE: &str =
    "pty requested but unavailable in this environment; ran without a terminal";
/// How long a closing session waits for its children to stop.
const CHILDREN_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long seeding a shell waits for the primary's environment record of its
/// last run (the shell writes it right after the status; it only fails to come
/// if the shell died in between).
const ENV_RECORD_WAIT: Duration = Duration::from_millis(500);

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
}

/// A Session's state.
#[derive(Debug)]
pub struct SessionState {
    args: SessionArgs,
    /// Last known working directory of the primary shell.
    cwd: PathBuf,
    /// Last known `export -p` of a primary shell (`None`: the base environment).
    env_snapshot: Option<Bytes>,
    /// The current primary's environment records.
    primary_env: Option<watch::Receiver<EnvRecord>>,
    /// Nonce of the primary's last completed run (its environment record is
    /// the one to seed from).
    last_run_nonce: Option<String>,
    primary: Option<ActorRef<ShellMsg>>,
    primary_holder: Option<JobId>,
    shells: HashMap<ActorId, ShellEntry>,
    jobs: HashMap<JobId, JobEntry>,
    job_ids: HashMap<ActorId, JobId>,
    finished: VecDeque<JobId>,
    budget: RestartBudget,
    unavailable_until: Option<Instant>,
}

#[derive(Debug)]
struct ShellEntry {
    actor: ActorRef<ShellMsg>,
    role: ShellRole,
    holder: Option<JobId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ShellRole {
    Primary,
    Isolated,
    Retired,
}

#[derive(Debug)]
struct JobEntry {
    actor: ActorRef<JobMsg>,
    shell: Option<ActorId>,
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
            finished: VecDeque::new(),
            unavailable_until: None,
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
            SessionMsg::Run { request, reply } => state.run(&myself, request, reply).await,
            SessionMsg::ReadOutput {
                job_id,
                offset,
                max,
                reply,
            } => match state.jobs.get(&job_id) {
                Some(job) => {
                    if let Err(err) = job.actor.cast(JobMsg::ReadOutput { offset, max, reply })
                        && let ractor::MessagingErr::SendErr(JobMsg::ReadOutput { reply, .. }) = err
                    {
                        let _ = reply.send(Err(Error::JobNotFound {
                            id: job_id.to_string(),
                        }));
                    }
                }
                None => {
                    let _ = reply.send(Err(Error::JobNotFound {
                        id: job_id.to_string(),
                    }));
                }
            },
            SessionMsg::Job(JobNotice::ShellReleased { job_id, release }) => {
                state.shell_released(&myself, &job_id, release).await;
            }
            SessionMsg::Job(JobNotice::ShellRefused { job_id }) => {
                state.shell_refused(&myself, &job_id).await;
            }
            SessionMsg::Shell(ShellNotice::Ended {
                shell,
                exit,
                during_run,
            }) => {
                // A run in progress is reported by its Job; an idle primary
                // that died is replaced now, so no run is lent a dead shell.
                let is_primary = self_is_primary(state, shell);
                if is_primary && !during_run {
                    if let Some(entry) = state.shells.get_mut(&shell) {
                        entry.role = ShellRole::Retired;
                    }
                    state.primary = None;
                    state.primary_holder = None;
                    let reason = format!(
                        "the shell exited with status {} while idle",
                        exit.shell_status()
                    );
                    state.primary_failed(&myself, &reason).await;
                }
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
                state.child_ended(&myself, &cell, reason).await;
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                state.child_ended(&myself, &cell, err.to_string()).await;
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

/// Whether `shell` is the session's current primary shell.
fn self_is_primary(state: &SessionState, shell: ActorId) -> bool {
    state.primary.as_ref().is_some_and(|p| p.get_id() == shell)
}

impl SessionState {
    async fn run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: RunRequest,
        reply: RpcReplyPort<Result<RunOutcome>>,
    ) {
        tracing::trace!(target: "shellvisor::stage", "session: run received");
        let plan = match self.plan(&request) {
            Ok(plan) => plan,
            Err(err) => {
                let _ = reply.send(Err(err));
                return;
            }
        };
        let job_id = match JobId::random() {
            Ok(id) => id,
            Err(err) => {
                let _ = reply.send(Err(Error::io("generating a job id", &err)));
                return;
            }
        };
        let shell = match self.lend_shell(myself, &job_id).await {
            Ok(shell) => shell,
            Err(err) => {
                let _ = reply.send(Err(err));
                return;
            }
        };
        let config = &self.args.config;
        let args = JobArgs {
            job_id: job_id.clone(),
            plan,
            shell: shell.clone(),
            reply: Some(reply),
            notify: myself.get_derived(),
            events: self.args.events.clone(),
            output: config.output.clone(),
            artifact_path: self.args.artifacts_dir.join(format!("{job_id}.log")),
            retention: Duration::from_secs(config.jobs.retention_secs),
            kill_grace: config.timeouts.kill_grace(),
        };
        match Actor::spawn_linked(None, Job, args, myself.get_cell()).await {
            Ok((job, _)) => {
                tracing::trace!(target: "shellvisor::stage", "session: job spawned");
                self.job_ids.insert(job.get_id(), job_id.clone());
                self.jobs.insert(
                    job_id,
                    JobEntry {
                        actor: job,
                        shell: Some(shell.get_id()),
                    },
                );
            }
            Err(err) => {
                // The reply port went with the failed Job's arguments; its
                // caller sees the call end. Give the shell back.
                tracing::warn!(session = %self.args.id, %err, "could not start a job");
                self.release_shell(myself, shell.get_id(), None).await;
            }
        }
    }

    /// Validates a request into a plan (the reference tool's order: env, cwd, timeout).
    fn plan(&self, request: &RunRequest) -> Result<RunPlan> {
        validate_env(&request.env)?;
        validate_command(&request.command)?;
        if request.run_async {
            return Err(Error::InvalidRequest {
                message:
                    "Async bash execution is disabled. Enable async.enabled to use async mode."
                        .to_owned(),
            });
        }
        let cwd = request
            .cwd
            .as_deref()
            .map(|cwd| resolve_cwd(cwd, &self.cwd, self.args.home.as_deref()))
            .transpose()?;
        let timeout = resolve_timeout(request.timeout, &self.args.config.timeouts);
        let mut notices = Vec::new();
        notices.extend(timeout.notice.clone());
        if request.pty {
            notices.push(PTY_UNAVAILABLE_NOTICE.to_owned());
        }
        Ok(RunPlan {
            command: request.command.clone(),
            cwd,
            env: request
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            timeout,
            notices,
        })
    }

    /// The shell a new run gets: the primary if it is free, otherwise a fresh
    /// isolated shell with the session's state.
    async fn lend_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
    ) -> Result<ActorRef<ShellMsg>> {
        if self.primary.is_none() {
            self.start_primary(myself).await?;
        }
        if self.primary_holder.is_none()
            && let Some(primary) = self.primary.clone()
        {
            self.primary_holder = Some(job_id.clone());
            if let Some(entry) = self.shells.get_mut(&primary.get_id()) {
                entry.holder = Some(job_id.clone());
            }
            return Ok(primary);
        }
        let shell = self.start_shell(myself, ShellRole::Isolated).await?;
        if let Some(entry) = self.shells.get_mut(&shell.get_id()) {
            entry.holder = Some(job_id.clone());
        }
        Ok(shell)
    }

    async fn start_primary(&mut self, myself: &ActorRef<SessionMsg>) -> Result<()> {
        if let Some(until) = self.unavailable_until {
            let now = Instant::now();
            if now < until {
                return Err(Error::ShellUnavailable {
                    session: self.args.id.to_string(),
                    restarts: self.budget.failures(now),
                    window_secs: self.args.config.restart.window_secs,
                });
            }
            self.unavailable_until = None;
        }
        let shell = self.start_shell(myself, ShellRole::Primary).await?;
        self.primary = Some(shell);
        self.primary_holder = None;
        Ok(())
    }

    async fn start_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        role: ShellRole,
    ) -> Result<ActorRef<ShellMsg>> {
        let env = self.shell_env().await;
        let (env_tx, env_rx) = if role == ShellRole::Primary {
            let (tx, rx) = watch::channel(EnvRecord::default());
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let config = &self.args.config;
        let cwd = if self.cwd.is_dir() {
            self.cwd.clone()
        } else {
            self.args
                .home
                .clone()
                .filter(|h| h.is_dir())
                .unwrap_or_else(|| PathBuf::from("/"))
        };
        let args = ShellArgs {
            spawner: Arc::clone(&self.args.spawner),
            registry: Arc::clone(&self.args.registry),
            spawn: ShellSpawnSpec {
                program: config.shell.program.clone(),
                env,
                cwd,
            },
            parent_dir: self.args.dir.clone(),
            startup_timeout: config.shell.startup_timeout(),
            kill_grace: config.timeouts.kill_grace(),
            notify: Some(myself.get_derived()),
            env: env_tx,
        };
        let (shell, _) = Actor::spawn_linked(None, Shell, args, myself.get_cell())
            .await
            .map_err(|err| Error::Spawn {
                what: "shell".to_owned(),
                message: err.to_string(),
            })?;
        self.shells.insert(
            shell.get_id(),
            ShellEntry {
                actor: shell.clone(),
                role,
                holder: None,
            },
        );
        if env_rx.is_some() {
            self.primary_env = env_rx;
            self.last_run_nonce = None;
        }
        Ok(shell)
    }

    /// The environment for a new shell: the last snapshot of the primary's
    /// exported variables (minus reserved names), or the base environment.
    async fn shell_env(&mut self) -> Vec<(OsString, OsString)> {
        self.refresh_env_snapshot().await;
        if let Some(snapshot) = &self.env_snapshot {
            match parse_exported_env(snapshot) {
                Ok(vars) => {
                    return vars
                        .into_iter()
                        .filter(|(name, _)| name.to_str().is_some_and(|n| !is_reserved_env_name(n)))
                        .collect();
                }
                Err(err) => {
                    tracing::warn!(session = %self.args.id, %err, "unreadable environment snapshot; using the base environment");
                }
            }
        }
        self.args.base_env.as_ref().clone()
    }

    /// Takes the primary's latest environment record, waiting briefly for the
    /// one of its last completed run if it has not been read yet.
    async fn refresh_env_snapshot(&mut self) {
        let Some(receiver) = self.primary_env.as_mut() else {
            return;
        };
        if let Some(nonce) = self.last_run_nonce.clone() {
            let arrived = tokio::time::timeout(
                ENV_RECORD_WAIT,
                receiver.wait_for(|record| record.nonce == nonce),
            )
            .await;
            if !matches!(arrived, Ok(Ok(_))) {
                tracing::debug!(session = %self.args.id, "environment record of the last run missing; using the previous one");
            }
        }
        let record = receiver.borrow();
        if !record.env.is_empty() {
            self.env_snapshot = Some(record.env.clone());
        }
    }

    async fn shell_released(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
        release: ShellRelease,
    ) {
        let Some(shell_id) = self.jobs.get_mut(job_id).and_then(|job| job.shell.take()) else {
            return;
        };
        self.finished.push_back(job_id.clone());
        self.evict_old_jobs();
        self.release_shell(myself, shell_id, Some(release)).await;
    }

    /// A Job's shell refused its run before anything ran: retire that shell
    /// and lend the Job another.
    async fn shell_refused(&mut self, myself: &ActorRef<SessionMsg>, job_id: &JobId) {
        let Some(job) = self.jobs.get_mut(job_id) else {
            return;
        };
        let actor = job.actor.clone();
        if let Some(old) = job.shell.take()
            && let Some(entry) = self.shells.get_mut(&old)
        {
            let was_primary = entry.role == ShellRole::Primary;
            entry.role = ShellRole::Retired;
            entry.holder = None;
            let _ = entry.actor.cast(ShellMsg::Kill(KillReason::Release));
            if was_primary && self.primary.as_ref().is_some_and(|p| p.get_id() == old) {
                self.primary = None;
                self.primary_holder = None;
            }
        }
        match self.lend_shell(myself, job_id).await {
            Ok(shell) => {
                if let Some(job) = self.jobs.get_mut(job_id) {
                    job.shell = Some(shell.get_id());
                }
                let _ = actor.cast(JobMsg::UseShell(shell));
            }
            Err(err) => {
                let _ = actor.cast(JobMsg::ShellGone {
                    reason: err.to_string(),
                });
            }
        }
    }

    /// Takes a shell back from a job. `release` is `None` when its state is unknown.
    async fn release_shell(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        shell_id: ActorId,
        release: Option<ShellRelease>,
    ) {
        let Some(entry) = self.shells.get_mut(&shell_id) else {
            return;
        };
        entry.holder = None;
        match (entry.role, release) {
            (
                ShellRole::Primary,
                Some(ShellRelease::Reusable {
                    status,
                    env_follows,
                }),
            ) => {
                if let Some(cwd) = status.cwd {
                    self.cwd = cwd;
                }
                if env_follows {
                    self.last_run_nonce = Some(status.nonce);
                }
                self.primary_holder = None;
            }
            (ShellRole::Primary, _) => {
                // It ended during the run (exit, exec, timeout) or is in an
                // unknown state: replace it with one that has the same state.
                // This is the user's doing, not a crash: no budget charge.
                entry.role = ShellRole::Retired;
                let _ = entry.actor.cast(ShellMsg::Kill(KillReason::Release));
                self.primary = None;
                self.primary_holder = None;
                if let Err(err) = self.start_primary(myself).await {
                    tracing::warn!(session = %self.args.id, %err, "could not replace the shell");
                }
            }
            (ShellRole::Isolated, _) | (ShellRole::Retired, _) => {
                entry.role = ShellRole::Retired;
                let _ = entry.actor.cast(ShellMsg::Kill(KillReason::Release));
            }
        }
    }

    fn evict_old_jobs(&mut self) {
        let max = self.args.config.jobs.max_retained_per_session;
        while self.finished.len() > max {
            if let Some(old) = self.finished.pop_front()
                && let Some(job) = self.jobs.get(&old)
            {
                job.actor
                    .stop(Some("evicted: too many finished jobs retained".to_owned()));
            }
        }
    }

    async fn child_ended(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        cell: &ActorCell,
        reason: String,
    ) {
        let id = cell.get_id();
        if let Some(entry) = self.shells.remove(&id) {
            if let Some(job_id) = &entry.holder
                && let Some(job) = self.jobs.get(job_id)
            {
                let _ = job.actor.cast(JobMsg::ShellGone {
                    reason: reason.clone(),
                });
            }
            if entry.role == ShellRole::Primary
                && self.primary.as_ref().is_some_and(|p| p.get_id() == id)
            {
                self.primary = None;
                self.primary_holder = None;
                self.primary_failed(myself, &reason).await;
            }
            return;
        }
        if let Some(job_id) = self.job_ids.remove(&id) {
            let entry = self.jobs.remove(&job_id);
            self.finished.retain(|j| j != &job_id);
            if let Some(shell_id) = entry.and_then(|job| job.shell) {
                // The job died holding its shell: the shell's state is unknown.
                self.release_shell(myself, shell_id, None).await;
            }
        }
    }

    /// The primary shell died outside any run, or failed to start: charge the
    /// budget and restart, or refuse until the window passes.
    async fn primary_failed(&mut self, myself: &ActorRef<SessionMsg>, reason: &str) {
        tracing::warn!(session = %self.args.id, reason, "shell ended unexpectedly");
        let now = Instant::now();
        if let Some(until) = self.budget.charge(now) {
            tracing::warn!(session = %self.args.id, "shell restart budget spent; shell unavailable until the window passes");
            self.unavailable_until = Some(until);
            return;
        }
        if let Err(err) = self.start_primary(myself).await {
            tracing::warn!(session = %self.args.id, %err, "could not restart the shell");
        }
    }
}
