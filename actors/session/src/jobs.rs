//! The session's jobs: admission, the job API, and the completion stream.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorRef;
use ractor::MessagingErr;
use ractor::RpcReplyPort;
use shellvisor_actor_job::CallerAnswer;
use shellvisor_actor_job::FinishedRun;
use shellvisor_actor_job::Job;
use shellvisor_actor_job::JobArgs;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_job::JobRef;
use shellvisor_actor_job::JobStart;
use shellvisor_actor_job::Runner;
use shellvisor_actor_job::ShellRelease;
use shellvisor_output::background_text;
use shellvisor_policy::PlanContext;
use shellvisor_policy::RunPlan;
use shellvisor_policy::UrlContext;
use shellvisor_policy::plan;
use shellvisor_protocol::BackgroundReason;
use shellvisor_protocol::BackgroundedRun;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::JobPage;
use shellvisor_protocol::JobQuery;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;
use tokio::sync::oneshot;

use crate::actor::SessionState;
use crate::messages::SessionMsg;

/// The `local://` root's directory inside the session's artifacts directory.
const LOCAL_DIR: &str = "local";

/// The `local://` root of a session whose artifacts go to `artifacts_dir`.
pub(crate) fn local_root(artifacts_dir: &Path) -> PathBuf {
    artifacts_dir.join(LOCAL_DIR)
}
/// How long a job may take to answer the session.
const JOB_ANSWER_DEADLINE: Duration = Duration::from_secs(2);

/// Who is told a run's job id as soon as its Job exists.
pub(crate) type StartedTx = Option<oneshot::Sender<JobId>>;

/// Whoever asked for a run: answered once, and told the job id as soon as
/// the Job exists.
#[derive(Debug)]
pub(crate) struct RunCaller {
    pub(crate) reply: RpcReplyPort<Result<RunOutcome>>,
    pub(crate) started: StartedTx,
}

/// A run no pooled Job took: the Job to spawn for it.
pub(crate) struct JobToSpawn {
    job_id: JobId,
    args: Box<JobArgs>,
    started: StartedTx,
    on_terminal: bool,
}

/// A planned run that needs a shell (not a terminal): what it needs to
/// start, kept while it waits for one.
#[derive(Debug)]
pub(crate) struct ShellRun {
    job_id: JobId,
    plan: RunPlan,
    caller: RunCaller,
    /// An explicit async run (a fresh shell, answered at once).
    is_async: bool,
}

impl ShellRun {
    /// Answers the caller with `err`; nothing started.
    pub(crate) fn refuse(self, err: Error) {
        let _ = self.caller.reply.send(Err(err));
    }

    /// Whether the caller stopped waiting for the answer.
    pub(crate) fn caller_left(&self) -> bool {
        self.caller.reply.is_closed()
    }
}

impl SessionState {
    pub(crate) async fn run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: RunRequest,
        reply: RpcReplyPort<Result<RunOutcome>>,
        started: StartedTx,
    ) {
        tracing::trace!(target: "shellvisor::stage", "session: run received");
        let (mut plan, job_id) = match self.plan(&request).and_then(|plan| {
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
        if let Some(notice) = self.relocated.take() {
            plan.notices.push(notice);
        }
        if request.pty {
            match self.open_terminal(&request, &mut plan) {
                Ok(Some(terminal)) => {
                    let caller = RunCaller { reply, started };
                    // Boxed: it starts a terminal's actors (see `lend_shell`).
                    Box::pin(
                        self.run_on_terminal(myself, &request, job_id, plan, terminal, caller),
                    )
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
        if !request.pty
            && !request.run_async
            && let Some(terminals) = self.args.ctx.client_terminals.clone()
        {
            if plan.ready.is_some() || plan.idle_timeout.is_some() || plan.limits.is_some() {
                plan.notices.push(
                    "wait_for, idle_timeout and limits do not apply in a client terminal."
                        .to_owned(),
                );
            }
            if let Some(started) = started {
                let _ = started.send(job_id.clone());
            }
            let ctx = Arc::clone(&self.args.ctx);
            tokio::spawn(async move {
                let outcome = crate::client_terminal::run(ctx, terminals, job_id, plan).await;
                let _ = reply.send(outcome);
            });
            return;
        }
        let run = ShellRun {
            job_id,
            plan,
            caller: RunCaller { reply, started },
            is_async: request.run_async,
        };
        if let Err((err, run)) = self.start_shell_run(myself, run).await {
            self.wait_for_a_shell(myself, err, run);
        }
    }

    /// Starts a run on a shell: a foreground run on the primary (or a fresh
    /// shell with the session's state when the primary is busy), an async
    /// run on a fresh shell under both running-job caps, answered at once.
    /// A run that gets no shell comes back with why, to wait for one or be
    /// refused ([`Self::wait_for_a_shell`]).
    pub(crate) async fn start_shell_run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        run: ShellRun,
    ) -> std::result::Result<(), (Error, ShellRun)> {
        if run.is_async {
            // Boxed (see `lend_shell`): it starts a shell.
            return Box::pin(self.start_async_run(myself, run)).await;
        }
        let shell = match self.lend_shell(myself, &run.job_id).await {
            Ok(shell) => shell,
            Err(err) => return Err((err, run)),
        };
        let ShellRun {
            job_id,
            plan,
            caller,
            ..
        } = run;
        if let Some(spawn) =
            self.start_foreground(myself, job_id, plan, Runner::Shell(shell), caller)
        {
            // Boxed (see `lend_shell`).
            let _ = Box::pin(self.spawn_job(myself, spawn)).await;
        }
        Ok(())
    }

    /// [`Self::start_shell_run`] for an async run: on a fresh shell, under
    /// both running-job caps, answered at once.
    async fn start_async_run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        run: ShellRun,
    ) -> std::result::Result<(), (Error, ShellRun)> {
        let slot = match self.args.slots.try_acquire() {
            Ok(slot) => slot,
            Err(limit) => {
                run.refuse(Error::JobLimitReached { limit });
                return Ok(());
            }
        };
        let shell = match self.isolated_shell(myself, &run.job_id).await {
            Ok(shell) => shell,
            Err(err) => return Err((err, run)),
        };
        let ShellRun {
            job_id,
            plan,
            caller,
            ..
        } = run;
        let answer = self.requested_start(&job_id, &plan);
        let start = JobStart::Background { slot };
        let outcome = self
            .start_job(
                myself,
                job_id,
                plan,
                Runner::Shell(shell),
                start,
                caller.started,
            )
            .await
            .map(|()| RunOutcome::Backgrounded(answer));
        let _ = caller.reply.send(outcome);
        Ok(())
    }

    /// Validates and shapes a request (see [`shellvisor_policy::plan`]).
    fn plan(&self, request: &RunRequest) -> Result<RunPlan> {
        let ctx = &self.args.ctx;
        plan(
            request,
            &PlanContext {
                config: &ctx.config,
                interceptor: ctx.interceptor.as_ref(),
                urls: UrlContext {
                    local_root: &self.local_root,
                    artifacts_dir: &self.args.artifacts_dir,
                    resolvers: &ctx.resolvers,
                },
                session_cwd: self.shells.cwd(),
                home: ctx.home.as_deref(),
                cdpath: self.shells.exports("CDPATH"),
            },
        )
    }

    /// Starts a job whose caller waits, with the auto-background timer
    /// armed; answers the Job to spawn when no pooled Job took the run (on
    /// failure the reply port goes with the Job's arguments: its caller
    /// sees the call end, `actor_gone`).
    #[must_use]
    pub(crate) fn start_foreground(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: JobId,
        plan: RunPlan,
        runner: Runner,
        caller: RunCaller,
    ) -> Option<JobToSpawn> {
        let auto_background = plan.auto_background;
        if let Runner::Shell(_) = &runner
            && self.shells.primary_held_by(&job_id)
        {
            let leaves_shell_in = [plan.timeout.deadline, auto_background]
                .into_iter()
                .flatten()
                .min();
            self.schedule_standby(myself, &job_id, leaves_shell_in);
        }
        let start = JobStart::Foreground {
            reply: caller.reply,
            auto_background,
        };
        self.hand_to_job(job_id, plan, runner, start, caller.started)
    }

    /// Hands the run to a Job and books it: a pooled Job whose last run is
    /// recorded, or else one spawned now (and kept for the next runs when
    /// this one ends).
    pub(crate) async fn start_job(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: JobId,
        plan: RunPlan,
        runner: Runner,
        start: JobStart,
        started: StartedTx,
    ) -> Result<()> {
        match self.hand_to_job(job_id, plan, runner, start, started) {
            None => Ok(()),
            // Boxed (see `lend_shell`).
            Some(spawn) => Box::pin(self.spawn_job(myself, spawn)).await,
        }
    }

    /// Hands the run to a pooled Job, or answers the Job to spawn for it.
    fn hand_to_job(
        &mut self,
        job_id: JobId,
        plan: RunPlan,
        runner: Runner,
        start: JobStart,
        mut started: StartedTx,
    ) -> Option<JobToSpawn> {
        tracing::trace!(target: "shellvisor::stage", "session: start_job");
        let on_terminal = matches!(runner, Runner::Pty(_));
        let args = Box::new(JobArgs {
            ctx: Arc::clone(&self.args.ctx),
            job_id: job_id.clone(),
            plan,
            runner,
            start,
            slots: self.args.slots.clone(),
            notify: self.job_notices.clone(),
            events: self.args.events.clone(),
            artifact_path: shellvisor_policy::artifact_path(
                &self.args.artifacts_dir,
                job_id.as_str(),
            ),
            artifacts: self.args.artifacts.clone(),
            containment: self.args.containment.clone(),
            init: self.args.init.clone(),
        });
        let (job_id, args) = self
            .begin_on_spare(job_id, args, &mut started, on_terminal)
            .err()?;
        Some(JobToSpawn {
            job_id,
            args,
            started,
            on_terminal,
        })
    }

    /// Hands the run to a spare Job, if one takes it (booked then); the
    /// arguments come back when none is left.
    fn begin_on_spare(
        &mut self,
        job_id: JobId,
        mut args: Box<JobArgs>,
        started: &mut StartedTx,
        on_terminal: bool,
    ) -> std::result::Result<(), (JobId, Box<JobArgs>)> {
        while let Some(spare) = self.job_pool.take_spare() {
            match spare.cast(JobMsg::Begin(args)) {
                Ok(()) => {
                    tracing::trace!(target: "shellvisor::stage", "session: job reused");
                    if let Some(started) = started.take() {
                        let _ = started.send(job_id.clone());
                    }
                    self.jobs.add(job_id, JobRef::Live(spare), on_terminal);
                    return Ok(());
                }
                Err(MessagingErr::SendErr(JobMsg::Begin(back))) => args = back,
                // Not sent, and nothing came back to send elsewhere: its
                // caller sees the call end, as with a Job that cannot start.
                Err(_) => return Ok(()),
            }
        }
        Err((job_id, args))
    }

    /// Spawns a Job for the run and books it.
    pub(crate) async fn spawn_job(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        spawn: JobToSpawn,
    ) -> Result<()> {
        let JobToSpawn {
            job_id,
            args,
            started,
            on_terminal,
        } = spawn;
        match Actor::spawn_linked(None, Job, *args, myself.get_cell()).await {
            Ok((job, _)) => {
                tracing::trace!(target: "shellvisor::stage", "session: job spawned");
                if let Some(started) = started {
                    let _ = started.send(job_id.clone());
                }
                self.jobs.add(job_id, JobRef::Live(job), on_terminal);
                Ok(())
            }
            Err(err) => {
                tracing::warn!(session = %self.args.id, %err, "could not start a job");
                self.give_back_shell(myself, &job_id, None).await;
                Err(Error::Spawn {
                    what: "job".to_owned(),
                    message: err.to_string(),
                })
            }
        }
    }

    /// The answer to an explicit async request: the job's id and label.
    pub(crate) fn requested_start(&self, job_id: &JobId, plan: &RunPlan) -> BackgroundedRun {
        BackgroundedRun {
            job_id: job_id.clone(),
            label: plan.label.clone(),
            reason: BackgroundReason::Requested,
            preview: String::new(),
            output_bytes: 0,
            cwd: plan.start_dir().display().to_string(),
            timeout: plan.timeout.info,
            text: background_text(
                job_id.as_str(),
                &plan.label,
                "",
                &plan.notices,
                &self.args.ctx.config.jobs.background_hint,
            ),
        }
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
                let _ = job.send(message(reply));
            }
            None => {
                let _ = reply.send(Err(Error::JobNotFound {
                    id: job_id.to_string(),
                }));
            }
        }
    }

    /// Answers with one page of the retained jobs' states, oldest first,
    /// without holding the session up while the jobs answer. Only the
    /// page's jobs are asked, all at once, answering in parallel, so the
    /// page costs about one job's answer, not their sum and not the
    /// session's size; a job that does not answer within the deadline (or
    /// has stopped) is left out.
    pub(crate) fn list_jobs(&self, query: JobQuery, reply: RpcReplyPort<JobPage>) {
        let page = self.jobs.page(query.cursor, query.limit);
        let asked: Vec<_> = page
            .jobs
            .iter()
            .filter_map(|job| {
                let (tx, rx) = tokio::sync::oneshot::channel();
                job.send(JobMsg::GetInfo(RpcReplyPort::from(tx))).ok()?;
                Some(rx)
            })
            .collect();
        let (retained, next_cursor) = (page.retained, page.next_cursor);
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + JOB_ANSWER_DEADLINE;
            let mut jobs = Vec::with_capacity(asked.len());
            for answer in asked {
                if let Ok(Ok(Ok(info))) = tokio::time::timeout_at(deadline, answer).await {
                    jobs.push(info);
                }
            }
            let _ = reply.send(JobPage {
                jobs,
                retained,
                next_cursor,
            });
        });
    }

    /// A job is over: its shell comes back, it counts as finished (the
    /// oldest finished jobs beyond the retention limit are evicted), and a
    /// background result nobody waited for goes to the completion stream.
    pub(crate) async fn job_finished(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        job_id: &JobId,
        release: ShellRelease,
        deliver: bool,
        record: Option<Arc<FinishedRun>>,
        answer: Option<CallerAnswer>,
    ) {
        let max = self.args.ctx.config.jobs.max_retained_per_session;
        let Some(evicted) = self.jobs.finish(job_id, max) else {
            if let Some(answer) = answer {
                answer.send();
            }
            return;
        };
        if let Some(record) = record {
            self.keep_record(myself, job_id, record);
        }
        const EVICTED: &str = "evicted: too many finished jobs retained";
        for job in evicted {
            match job {
                JobRef::Live(actor) => actor.stop(Some(EVICTED.to_owned())),
                JobRef::Finished(record) => {
                    self.drop_record(&record.info().job_id, EVICTED);
                }
            }
        }
        let replace_primary = self.take_back_shell(job_id, Some(&release));
        // The caller is the last task woken here, so it runs next on this
        // thread; a shell to replace waits until it has its answer.
        if let Some(answer) = answer {
            answer.send();
        }
        if replace_primary {
            self.replace_primary(myself).await;
        }
        if deliver {
            self.jobs.queue_completion(job_id.clone());
            self.serve_completions().await;
        }
    }

    /// Hands finished background jobs' results to callers waiting for the
    /// next completion. Each result goes out once: the job offers it (a
    /// claim) and counts it delivered when the consumer takes the offer, so
    /// a wait that took it first wins, and an offer nobody takes (every
    /// consumer left, or one vanished after it was sent) is given back by
    /// being dropped and comes back here as undelivered.
    pub(crate) async fn serve_completions(&mut self) {
        while let Some((_job_id, job)) = self.jobs.next_to_deliver() {
            let (tx, rx) = oneshot::channel();
            if job.send(JobMsg::Claim(RpcReplyPort::from(tx))).is_err() {
                continue;
            }
            let Ok(Ok(Some(mut offer))) = tokio::time::timeout(JOB_ANSWER_DEADLINE, rx).await
            else {
                continue;
            };
            loop {
                let Some(waiter) = self.jobs.next_waiter() else {
                    // Everyone left meanwhile: dropping the offer gives it back.
                    return;
                };
                match waiter.send(offer) {
                    Ok(()) => break,
                    Err(MessagingErr::SendErr(unsent)) => offer = unsent,
                    // Nothing came back to retry with: the offer was dropped,
                    // which gave it back.
                    Err(_) => return,
                }
            }
        }
    }
}
