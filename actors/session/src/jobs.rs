//! The session's jobs: admission, the job API, and the completion stream.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorRef;
use ractor::MessagingErr;
use ractor::RpcReplyPort;
use ractor::rpc::CallResult;
use shellvisor_actor_job::Job;
use shellvisor_actor_job::JobArgs;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_job::JobStart;
use shellvisor_actor_job::PtyLaunch;
use shellvisor_actor_job::RunPlan;
use shellvisor_actor_job::Runner;
use shellvisor_actor_job::ShellRelease;
use shellvisor_output::background_text;
use shellvisor_output::job_label;
use shellvisor_policy::INTERNAL_SCHEMES;
use shellvisor_policy::UrlContext;
use shellvisor_policy::UrlTarget;
use shellvisor_policy::expand_internal_urls;
use shellvisor_policy::resolve_cwd;
use shellvisor_policy::resolve_timeout;
use shellvisor_policy::rewrite_leading_cd;
use shellvisor_policy::validate_command;
use shellvisor_policy::validate_env;
use shellvisor_process::pty::Terminal;
use shellvisor_process::pty::TerminalSpawnSpec;
use shellvisor_protocol::BackgroundReason;
use shellvisor_protocol::BackgroundedRun;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::JobInfo;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;
use shellvisor_protocol::TerminalSize;

use crate::actor::JobEntry;
use crate::actor::SessionState;
use crate::messages::SessionMsg;

/// Notice added when a PTY is requested but cannot be provided.
const PTY_UNAVAILABLE_NOTICE: &str =
    "pty requested but unavailable in this environment; ran without a terminal";
/// The reference tool's refusal of `async` when it is turned off.
const ASYNC_DISABLED: &str =
    "Async bash execution is disabled. Enable async.enabled to use async mode.";
/// The `local://` root's directory inside the session's artifacts directory.
const LOCAL_DIR: &str = "local";
/// How long a job may take to answer the session.
const JOB_ANSWER_DEADLINE: Duration = Duration::from_secs(2);

impl SessionState {
    pub(crate) async fn run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: RunRequest,
        reply: RpcReplyPort<Result<RunOutcome>>,
    ) {
        tracing::trace!(target: "shellvisor::stage", "session: run received");
        let (plan, job_id) = match self.plan(&request).and_then(|plan| {
            JobId::random()
                .map(|id| (plan, id))
                .map_err(|err| Error::io("generating a job id", &err))
        }) {
            Ok(planned) => planned,
            Err(err) => {
                let _ = reply.send(Err(err));
                return;
            }
        };
        tracing::trace!(target: "shellvisor::stage", "session: planned");
        let mut plan = plan;
        if request.pty {
            match self.open_terminal(&request, &mut plan) {
                Ok(Some(launch)) => {
                    self.run_on_terminal(myself, &request, job_id, plan, launch, reply)
                        .await;
                    return;
                }
                Ok(None) => {}
                Err(err) => {
                    let _ = reply.send(Err(err));
                    return;
                }
            }
        }
        if request.run_async {
            let started = self.start_async(myself, job_id, plan).await;
            let _ = reply.send(started.map(RunOutcome::Backgrounded));
            return;
        }
        let shell = match self.lend_shell(myself, &job_id).await {
            Ok(shell) => shell,
            Err(err) => {
                let _ = reply.send(Err(err));
                return;
            }
        };
        self.start_foreground(myself, job_id, plan, Runner::Shell(shell), reply)
            .await;
    }

    /// Starts a job whose caller waits, with the auto-background timer armed.
    async fn start_foreground(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: JobId,
        plan: RunPlan,
        runner: Runner,
        reply: RpcReplyPort<Result<RunOutcome>>,
    ) {
        let auto_background = self
            .args
            .config
            .jobs
            .auto_background_after(plan.timeout.deadline);
        if let Runner::Shell(shell) = &runner
            && self.is_primary(shell.get_id())
        {
            let leaves_shell_in = [plan.timeout.deadline, auto_background]
                .into_iter()
                .flatten()
                .min();
            self.schedule_standby(myself, &job_id, leaves_shell_in);
        }
        let start = JobStart::Foreground {
            reply,
            auto_background,
        };
        // On failure the reply port went with the Job's arguments: its caller
        // sees the call end (`actor_gone`).
        let _ = self.start_job(myself, job_id, plan, runner, start).await;
    }

    /// Opens a terminal for a `pty` request. `Ok(None)` when terminals are
    /// turned off or none can be opened: the run then goes without one and
    /// its plan carries the fallback notice.
    fn open_terminal(
        &mut self,
        request: &RunRequest,
        plan: &mut RunPlan,
    ) -> Result<Option<(Terminal, TerminalSize)>> {
        let config = &self.args.config.pty;
        if !config.enabled {
            plan.notices.push(PTY_UNAVAILABLE_NOTICE.to_owned());
            return Ok(None);
        }
        let running = self.jobs.values().filter(|job| job.pty_running).count();
        if running >= config.max_running_per_session {
            return Err(Error::PtyBusy {
                limit: config.max_running_per_session,
            });
        }
        let size = TerminalSize::clamped(request.cols, request.rows);
        match self.args.pty_backend.open(size) {
            Ok(terminal) => Ok(Some((terminal, size))),
            Err(err) => {
                tracing::warn!(session = %self.args.id, %err, "no pseudo-terminal available; running without one");
                plan.notices.push(PTY_UNAVAILABLE_NOTICE.to_owned());
                Ok(None)
            }
        }
    }

    /// Starts a run on a terminal: `bash -c <command>` with the session's
    /// exported environment, `TERM=xterm-256color` and the call's variables,
    /// in the call's (or the session's) directory. Explicit async answers at
    /// once; otherwise the caller waits for the exit, the auto-background
    /// timer, or the program waiting for input.
    async fn run_on_terminal(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: &RunRequest,
        job_id: JobId,
        plan: RunPlan,
        (terminal, size): (Terminal, TerminalSize),
        reply: RpcReplyPort<Result<RunOutcome>>,
    ) {
        let mut env: Vec<(OsString, OsString)> = self
            .shell_env()
            .await
            .into_iter()
            .filter(|(name, _)| name != "TERM" && !plan.env.iter().any(|(n, _)| name == n.as_str()))
            .collect();
        env.push(("TERM".into(), "xterm-256color".into()));
        env.extend(plan.env.iter().map(|(n, v)| (n.into(), v.into())));
        let shell = &self.args.config.shell.program;
        let spec = TerminalSpawnSpec {
            cgroup: self.args.cgroup.clone(),
            program: shell.clone(),
            args: vec![
                "--noprofile".into(),
                "--norc".into(),
                "-c".into(),
                plan.command.clone().into(),
            ],
            env,
            cwd: plan.cwd.clone().unwrap_or_else(|| self.cwd.clone()),
        };
        let config = &self.args.config.pty;
        let launch = Box::new(PtyLaunch {
            terminal,
            size,
            spec,
            spawner: Arc::clone(&self.args.spawner),
            registry: Arc::clone(&self.args.registry),
            probe_interval: Duration::from_millis(config.input_probe_ms.max(1)),
            drain: Duration::from_millis(config.drain_ms),
            stream_throttle_ms: config.stream_throttle_ms,
        });
        if request.run_async {
            let slot = match self.args.slots.try_acquire() {
                Ok(slot) => slot,
                Err(limit) => {
                    let _ = reply.send(Err(Error::JobLimitReached { limit }));
                    return;
                }
            };
            let started = requested_start(&job_id, &plan, &self.background_hint);
            let started = self
                .start_job(
                    myself,
                    job_id,
                    plan,
                    Runner::Pty(launch),
                    JobStart::Background { slot },
                )
                .await
                .map(|()| RunOutcome::Backgrounded(started));
            let _ = reply.send(started);
            return;
        }
        self.start_foreground(myself, job_id, plan, Runner::Pty(launch), reply)
            .await;
    }

    /// An explicit async run: a slot under both caps, a fresh shell with the
    /// session's state, and an answer at once.
    async fn start_async(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: JobId,
        plan: RunPlan,
    ) -> Result<BackgroundedRun> {
        let slot = self
            .args
            .slots
            .try_acquire()
            .map_err(|limit| Error::JobLimitReached { limit })?;
        let shell = self.isolated_shell(myself, &job_id).await?;
        let started = requested_start(&job_id, &plan, &self.background_hint);
        self.start_job(
            myself,
            job_id,
            plan,
            Runner::Shell(shell),
            JobStart::Background { slot },
        )
        .await
        .map(|()| started)
    }

    async fn start_job(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: JobId,
        plan: RunPlan,
        runner: Runner,
        start: JobStart,
    ) -> Result<()> {
        tracing::trace!(target: "shellvisor::stage", "session: start_job");
        let config = &self.args.config;
        let (shell, pty_running) = match &runner {
            Runner::Shell(shell) => (Some(shell.get_id()), false),
            Runner::Pty(_) => (None, true),
        };
        let args = JobArgs {
            job_id: job_id.clone(),
            plan,
            runner,
            start,
            slots: self.args.slots.clone(),
            notify: myself.get_derived(),
            events: self.args.events.clone(),
            output: config.output.clone(),
            artifact_path: self.args.artifacts_dir.join(format!("{job_id}.log")),
            retention: Duration::from_secs(config.jobs.retention_secs),
            kill_grace: config.timeouts.kill_grace(),
            background_hint: Arc::clone(&self.background_hint),
        };
        match Actor::spawn_linked(None, Job, args, myself.get_cell()).await {
            Ok((job, _)) => {
                tracing::trace!(target: "shellvisor::stage", "session: job spawned");
                if let Some(started) = self.started.take() {
                    let _ = started.send(job_id.clone());
                }
                self.job_ids.insert(job.get_id(), job_id.clone());
                self.job_order.push_back(job_id.clone());
                self.jobs.insert(
                    job_id,
                    JobEntry {
                        actor: job,
                        shell,
                        pty_running,
                    },
                );
                Ok(())
            }
            Err(err) => {
                tracing::warn!(session = %self.args.id, %err, "could not start a job");
                if let Some(shell) = shell {
                    self.release_shell(myself, shell, None).await;
                }
                Err(Error::Spawn {
                    what: "job".to_owned(),
                    message: err.to_string(),
                })
            }
        }
    }

    /// Validates and shapes a request into a plan, in the reference tool's
    /// order: env names, the leading `cd` rewrite, the async switch, the
    /// interceptor, internal URLs (command, env values, cwd), cwd, timeout.
    fn plan(&self, request: &RunRequest) -> Result<RunPlan> {
        validate_env(&request.env)?;
        validate_command(&request.command)?;
        let policy = &self.args.config.policy;
        let mut command = request.command.clone();
        let mut cwd = request.cwd.clone();
        let mut stripped = None;
        if cwd.is_none()
            && policy.cd_rewrite
            && let Some((dir, rest)) = rewrite_leading_cd(&command)
        {
            cwd = Some(dir);
            stripped = Some(rest.clone());
            command = rest;
        }
        if request.run_async && !self.args.config.jobs.async_enabled {
            return Err(Error::InvalidRequest {
                message: ASYNC_DISABLED.to_owned(),
            });
        }
        if let Some(interceptor) = &self.args.interceptor {
            interceptor.check(
                &request.command,
                stripped.as_deref(),
                &policy.interceptor.tools,
            )?;
        }
        let local_root = self.args.artifacts_dir.join(LOCAL_DIR);
        let urls = UrlContext {
            local_root: &local_root,
            artifacts_dir: &self.args.artifacts_dir,
            resolvers: &self.args.resolvers,
        };
        let command = expand_internal_urls(&command, &urls, UrlTarget::Command);
        let env = request
            .env
            .iter()
            .map(|(name, value)| {
                (
                    name.clone(),
                    expand_internal_urls(value, &urls, UrlTarget::EnvValue),
                )
            })
            .collect();
        let cwd = cwd
            .map(|cwd| {
                let expanded = if cwd.contains("://") || cwd.contains("local:/") {
                    expand_internal_urls(&cwd, &urls, UrlTarget::Cwd)
                } else {
                    cwd
                };
                unresolved_scheme(&expanded)?;
                resolve_cwd(&expanded, &self.cwd, self.args.home.as_deref())
            })
            .transpose()?;
        let timeout = resolve_timeout(request.timeout, &self.args.config.timeouts);
        let mut notices = Vec::new();
        notices.extend(timeout.notice.clone());
        Ok(RunPlan {
            label: job_label(&request.command),
            command,
            cwd,
            env,
            timeout,
            notices,
        })
    }

    /// Sends a request to one of this session's jobs. A job of another
    /// session, or an evicted one, is `job_not_found`.
    pub(crate) fn forward<T>(
        &self,
        job_id: &JobId,
        reply: RpcReplyPort<Result<T>>,
        message: impl FnOnce(RpcReplyPort<Result<T>>) -> JobMsg,
    ) {
        match self.jobs.get(job_id) {
            // If the job stops meanwhile, dropping the port tells the caller.
            Some(job) => {
                let _ = job.actor.cast(message(reply));
            }
            None => {
                let _ = reply.send(Err(Error::JobNotFound {
                    id: job_id.to_string(),
                }));
            }
        }
    }

    /// Answers with every retained job's state, oldest first, without
    /// holding the session up while the jobs answer.
    pub(crate) fn list_jobs(&self, reply: RpcReplyPort<Vec<JobInfo>>) {
        let actors: Vec<ActorRef<JobMsg>> = self
            .job_order
            .iter()
            .filter_map(|id| self.jobs.get(id).map(|job| job.actor.clone()))
            .collect();
        tokio::spawn(async move {
            let mut infos = Vec::with_capacity(actors.len());
            for actor in actors {
                if let Ok(CallResult::Success(Ok(info))) =
                    actor.call(JobMsg::GetInfo, Some(JOB_ANSWER_DEADLINE)).await
                {
                    infos.push(info);
                }
            }
            let _ = reply.send(infos);
        });
    }

    pub(crate) async fn job_backgrounded(&mut self, myself: &ActorRef<SessionMsg>, job_id: &JobId) {
        self.detach_primary(myself, job_id).await;
    }

    pub(crate) async fn job_finished(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
        release: ShellRelease,
        deliver: bool,
    ) {
        let Some(job) = self.jobs.get_mut(job_id) else {
            return;
        };
        if !job.pty_running && job.shell.is_none() {
            // Already handled (a duplicate notice).
            return;
        }
        job.pty_running = false;
        if let Some(shell_id) = job.shell.take() {
            self.release_shell(myself, shell_id, Some(release)).await;
        }
        self.finished.push_back(job_id.clone());
        self.evict_old_jobs();
        if deliver {
            self.completions.push_back(job_id.clone());
            self.serve_completions().await;
        }
    }

    /// Hands finished background jobs' results to callers waiting for the
    /// next completion. Each result goes out once: the job itself records the
    /// delivery (a claim), so a wait that took it first wins.
    pub(crate) async fn serve_completions(&mut self) {
        loop {
            self.completion_waiters.retain(|waiter| !waiter.is_closed());
            if self.completion_waiters.is_empty() {
                return;
            }
            let Some(job_id) = self.completions.pop_front() else {
                return;
            };
            let Some(actor) = self.jobs.get(&job_id).map(|job| job.actor.clone()) else {
                continue;
            };
            let Ok(CallResult::Success(Some(mut result))) =
                actor.call(JobMsg::Claim, Some(JOB_ANSWER_DEADLINE)).await
            else {
                continue;
            };
            loop {
                let Some(waiter) = self.completion_waiters.pop_front() else {
                    // Everyone left meanwhile: the result is undelivered again.
                    let _ = actor.cast(JobMsg::Unclaim);
                    self.completions.push_front(job_id);
                    return;
                };
                match waiter.send(result) {
                    Ok(()) => break,
                    Err(MessagingErr::SendErr(unsent)) => result = unsent,
                    Err(_) => {
                        let _ = actor.cast(JobMsg::Unclaim);
                        self.completions.push_front(job_id);
                        return;
                    }
                }
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
}

/// The answer to an explicit async request: the job's id and label.
fn requested_start(job_id: &JobId, plan: &RunPlan, hint: &str) -> BackgroundedRun {
    BackgroundedRun {
        job_id: job_id.clone(),
        label: plan.label.clone(),
        reason: BackgroundReason::Requested,
        preview: String::new(),
        timeout: plan.timeout.info,
        text: background_text(job_id.as_str(), &plan.label, "", &plan.notices, hint),
    }
}

/// A cwd that still names an internal scheme after expansion could not be
/// resolved; the reference tool refuses it with this message.
fn unresolved_scheme(cwd: &str) -> Result<()> {
    for scheme in INTERNAL_SCHEMES {
        if cwd.starts_with(&format!("{scheme}://"))
            || (scheme == "local" && cwd.starts_with("local:/"))
        {
            return Err(Error::InvalidRequest {
                message: format!(
                    "Path \"{cwd}\" uses internal scheme \"{scheme}\" and must be resolved through the proper protocol handler, not as a filesystem path."
                ),
            });
        }
    }
    Ok(())
}
