//! The session handle.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use ractor::MessagingErr;
use ractor::RpcReplyPort;
use ractor::rpc::CallResult;
use shellvisor_actor_pty::PtyCall;
use shellvisor_actor_session::SessionMsg;
use shellvisor_actor_supervisor::SessionEntry;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::JobInfo;
use shellvisor_protocol::JobPage;
use shellvisor_protocol::JobQuery;
use shellvisor_protocol::JobStatus;
use shellvisor_protocol::OutputChunk;
use shellvisor_protocol::Result;
use shellvisor_protocol::RunOutcome;
use shellvisor_protocol::RunRequest;
use shellvisor_protocol::RunResult;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::SessionId;
use shellvisor_protocol::SessionOptions;
use tokio::sync::broadcast;

use crate::pty::PtyHandle;
use crate::remote::PtyAnswer;
use crate::remote::PtyRequest;
use crate::remote::RemoteSession;
use crate::runtime::RuntimeInner;

/// A handle to one agent session: its persistent shell and its jobs. Cheap to
/// clone. Handles keep the runtime alive.
///
/// The session lives in this process, or in another one when the runtime
/// was built with
/// [`RuntimeBuilder::remote_sessions`](crate::RuntimeBuilder::remote_sessions):
/// every method means the same either way.
#[derive(Clone, Debug)]
pub struct Session {
    id: SessionId,
    runtime: Arc<RuntimeInner>,
    backend: Backend,
}

/// Where a session's calls go.
#[derive(Clone, Debug)]
enum Backend {
    /// To its actor in this runtime.
    Local(Arc<Local>),
    /// To another process.
    Remote(Arc<dyn RemoteSession>),
}

#[derive(Debug)]
struct Local {
    entry: Mutex<SessionEntry>,
    /// How the session was set up: a session reopened after its actor
    /// stopped is set up the same way.
    options: SessionOptions,
}

impl Session {
    pub(crate) fn new(
        id: SessionId,
        runtime: Arc<RuntimeInner>,
        entry: SessionEntry,
        options: SessionOptions,
    ) -> Self {
        Self {
            id,
            runtime,
            backend: Backend::Local(Arc::new(Local {
                entry: Mutex::new(entry),
                options,
            })),
        }
    }

    pub(crate) fn remote(
        id: SessionId,
        runtime: Arc<RuntimeInner>,
        remote: Arc<dyn RemoteSession>,
    ) -> Self {
        Self {
            id,
            runtime,
            backend: Backend::Remote(remote),
        }
    }

    /// `request` as a remote session runs it: a foreground run this
    /// runtime would turn into a background job says when, so the other
    /// process does what this runtime's configuration asks.
    fn for_remote(&self, mut request: RunRequest) -> RunRequest {
        if !request.run_async && request.auto_background_after.is_none() {
            let deadline = request.timeout.map(Duration::from_secs);
            request.auto_background_after =
                self.runtime.config().jobs.auto_background_after(deadline);
        }
        request
    }

    /// The session in another process this handle forwards to, if any
    /// (checking first that this runtime still runs).
    fn forwarded(&self) -> Result<Option<&Arc<dyn RemoteSession>>> {
        match &self.backend {
            Backend::Remote(remote) => {
                self.runtime.check_running()?;
                Ok(Some(remote))
            }
            Backend::Local(_) => Ok(None),
        }
    }

    /// The session's id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Runs a command in the session's shell and waits for its result.
    ///
    /// The command runs in the session's persistent shell, so `cd` and
    /// exported variables carry over to later calls. If another call is still
    /// running, this one runs at once in an isolated shell that starts from the
    /// session's working directory and exported variables. A non-zero exit or
    /// a timeout is a result (with `is_error` set), not an error.
    ///
    /// # Errors
    /// Validation errors (invalid env names, a missing `cwd`, ...),
    /// `shell_unavailable` when the shell keeps failing to start,
    /// `shutting_down`, and `actor_gone` if the run's actor was killed before
    /// answering (the command may have run; it is never retried).
    pub async fn run(&self, request: RunRequest) -> Result<RunOutcome> {
        if let Some(remote) = self.forwarded()? {
            return remote.run(self.for_remote(request)).await;
        }
        self.send_run(request, None).await
    }

    /// Starts a run like [`Session::run`] and returns as soon as its job
    /// exists, with a handle that knows the job id (to follow its output in
    /// [`Session::subscribe`], or to kill it) and resolves to the same outcome.
    ///
    /// # Errors
    /// As [`Session::run`], for a request refused before it started.
    pub async fn start_run(&self, request: RunRequest) -> Result<RunHandle> {
        if let Some(remote) = self.forwarded()? {
            let started = remote.start_run(self.for_remote(request)).await?;
            return Ok(RunHandle {
                job_id: started.job_id,
                outcome: tokio::spawn(started.outcome),
            });
        }
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let session = self.clone();
        let mut outcome =
            tokio::spawn(async move { session.send_run(request, Some(started_tx)).await });
        match started_rx.await {
            Ok(job_id) => Ok(RunHandle { job_id, outcome }),
            // Refused before a job existed: the call's own answer says why.
            Err(_) => match (&mut outcome).await {
                Ok(Ok(_)) => Err(Error::actor_gone("job")),
                Ok(Err(err)) => Err(err),
                Err(_) => Err(Error::actor_gone("session")),
            },
        }
    }

    async fn send_run(
        &self,
        request: RunRequest,
        started: Option<tokio::sync::oneshot::Sender<JobId>>,
    ) -> Result<RunOutcome> {
        self.runtime.check_running()?;
        let mut request = request;
        let mut started = started;
        // One retry, and only when the message never reached the session
        // (its actor had stopped): the command cannot have run.
        for attempt in 0..2 {
            let actor = self.entry()?.actor;
            match actor
                .call(
                    |reply| SessionMsg::Run {
                        request,
                        reply,
                        started,
                    },
                    None,
                )
                .await
            {
                Ok(CallResult::Success(result)) => return result,
                Ok(CallResult::Timeout | CallResult::SenderError) => {
                    return Err(Error::actor_gone("job"));
                }
                Err(MessagingErr::SendErr(SessionMsg::Run {
                    request: unsent,
                    started: unsent_started,
                    ..
                })) if attempt == 0 => {
                    request = unsent;
                    started = unsent_started;
                    self.reopen().await?;
                }
                Err(_) => return Err(Error::actor_gone("session")),
            }
        }
        Err(Error::actor_gone("session"))
    }

    /// Reads raw output bytes `[offset, offset + max)` of a job of this session
    /// (at most 1 MiB per call), while the job is retained. The chunk says how
    /// many bytes the job has produced so far.
    ///
    /// # Errors
    /// `job_not_found` for an unknown job or another session's job,
    /// `output_unavailable` when the range was neither kept in memory nor saved.
    pub async fn read_output(
        &self,
        job_id: &JobId,
        offset: u64,
        max: usize,
    ) -> Result<OutputChunk> {
        let job_id = job_id.clone();
        if let Some(remote) = self.forwarded()? {
            return remote.read_output(job_id, offset, max).await;
        }
        self.call(
            |reply| SessionMsg::ReadOutput {
                job_id,
                offset,
                max,
                reply,
            },
            None,
        )
        .await?
    }

    /// The session's retained jobs (running, and finished within the
    /// retention period), oldest first.
    ///
    /// # Errors
    /// `shutting_down`, or `actor_gone` if the session stopped.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>> {
        let query = JobQuery::first(usize::MAX);
        let page = self.list_jobs(query).await?;
        Ok(page.jobs)
    }

    /// One page of the session's retained jobs, oldest first: what a host
    /// lists at a time, costing what the page holds however many jobs the
    /// session retains. Follow `next_cursor` for the next page.
    ///
    /// ```
    /// # tokio_test_block_on(async {
    /// use shellvisor::{Config, JobQuery, Runtime, RunRequest};
    ///
    /// let runtime = Runtime::start(Config::default()).await?;
    /// let session = runtime.session("doc").await?;
    /// for _ in 0..5 {
    ///     session.run(RunRequest::new("true")).await?;
    /// }
    /// let mut query = JobQuery::first(2);
    /// let mut listed = Vec::new();
    /// loop {
    ///     let page = session.jobs_page(query).await?;
    ///     assert_eq!(page.retained, 5);
    ///     listed.extend(page.jobs);
    ///     match page.next_cursor {
    ///         Some(cursor) => query.cursor = Some(cursor),
    ///         None => break,
    ///     }
    /// }
    /// assert_eq!(listed, session.jobs().await?);
    /// runtime.shutdown().await;
    /// # Ok::<(), shellvisor::Error>(()) });
    /// # fn tokio_test_block_on<F: std::future::Future<Output = Result<(), shellvisor::Error>>>(f: F) {
    /// #     tokio::runtime::Runtime::new().unwrap().block_on(f).unwrap()
    /// # }
    /// ```
    ///
    /// # Errors
    /// `invalid_request` for a limit of 0; `shutting_down`, or
    /// `actor_gone` if the session stopped.
    pub async fn jobs_page(&self, query: JobQuery) -> Result<JobPage> {
        if query.limit == 0 {
            return Err(Error::InvalidRequest {
                message: "a job list's limit must be at least 1".to_owned(),
            });
        }
        self.list_jobs(query).await
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<JobPage> {
        if let Some(remote) = self.forwarded()? {
            return remote.jobs_page(query).await;
        }
        self.call(|reply| SessionMsg::ListJobs { query, reply }, None)
            .await
    }

    /// One job's state.
    ///
    /// # Errors
    /// `job_not_found` for an unknown job or another session's job.
    pub async fn job(&self, job_id: &JobId) -> Result<JobInfo> {
        let job_id = job_id.clone();
        if let Some(remote) = self.forwarded()? {
            return remote.job(job_id).await;
        }
        self.call(|reply| SessionMsg::JobInfo { job_id, reply }, None)
            .await?
    }

    /// Waits up to `timeout` for a job to finish and returns its result, or
    /// `None` if it is still running then. A wait that returns the result
    /// counts as its delivery: the completion stream will not repeat it.
    ///
    /// # Errors
    /// `job_not_found` for an unknown job or another session's job.
    pub async fn wait(&self, job_id: &JobId, timeout: Duration) -> Result<Option<RunResult>> {
        if let Some(remote) = self.forwarded()? {
            return remote.wait_any(vec![job_id.clone()], timeout).await;
        }
        self.runtime.check_running()?;
        let actor = self.entry()?.actor;
        let job_id = job_id.clone();
        match actor
            .call(|reply| SessionMsg::Wait { job_id, reply }, Some(timeout))
            .await
        {
            // Taken before the result reaches the caller: a caller that never
            // gets it (its wait timed out as it was sent, its future was
            // dropped) drops the offer instead, which gives it back.
            Ok(CallResult::Success(offer)) => offer.map(|offer| Some(offer.take())),
            Ok(CallResult::Timeout) => Ok(None),
            Ok(CallResult::SenderError) => Err(Error::actor_gone("job")),
            Err(_) => Err(Error::actor_gone("session")),
        }
    }

    /// Waits up to `timeout` for the first of several jobs to finish and
    /// returns its result (a delivery, as with [`Session::wait`]), or `None`
    /// if all are still running then. Results of the others are not taken.
    ///
    /// # Errors
    /// `invalid_request` for an empty list; `job_not_found` for an unknown
    /// job or another session's job.
    pub async fn wait_any(
        &self,
        job_ids: &[JobId],
        timeout: Duration,
    ) -> Result<Option<RunResult>> {
        /// How long taking a finished job's result may take.
        const TAKE: Duration = Duration::from_secs(5);
        match job_ids {
            [] => {
                return Err(Error::InvalidRequest {
                    message: "give at least one job id".to_owned(),
                });
            }
            [one] => return self.wait(one, timeout).await,
            _ => {}
        }
        if let Some(remote) = self.forwarded()? {
            return remote.wait_any(job_ids.to_vec(), timeout).await;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribed before the first check, so no finish falls between.
        let mut events = self.subscribe();
        loop {
            for job_id in job_ids {
                if self.job(job_id).await?.state != JobStatus::Running {
                    return self.wait(job_id, TAKE).await;
                }
            }
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Err(_) => return Ok(None),
                    Ok(None) => return Err(Error::actor_gone("session")),
                    Ok(Some(SessionEvent::JobFinished { job_id, .. }))
                        if job_ids.contains(&job_id) =>
                    {
                        return self.wait(&job_id, TAKE).await;
                    }
                    // Events were dropped: check the jobs again.
                    Ok(Some(SessionEvent::Lagged { .. })) => break,
                    Ok(Some(_)) => {}
                }
            }
        }
    }

    /// Kills a job's whole process tree (SIGTERM, then SIGKILL after the
    /// grace period) and returns once it has ended. Killing a finished job
    /// does nothing.
    ///
    /// # Errors
    /// `job_not_found` for an unknown job or another session's job.
    pub async fn kill(&self, job_id: &JobId) -> Result<()> {
        let job_id = job_id.clone();
        if let Some(remote) = self.forwarded()? {
            return remote.kill(job_id).await;
        }
        self.call(|reply| SessionMsg::Kill { job_id, reply }, None)
            .await?
    }

    /// The result of the next background job to finish whose result nobody
    /// has taken (by a wait, or an earlier call of this). Waits until one
    /// finishes; each result is returned exactly once. Several callers share
    /// the stream (each result goes to one of them).
    ///
    /// # Errors
    /// `shutting_down`, or `actor_gone` if the session stopped.
    pub async fn next_completion(&self) -> Result<RunResult> {
        if let Some(remote) = self.forwarded()? {
            return remote.next_completion().await;
        }
        loop {
            let offer = self.call(SessionMsg::NextCompletion, None).await?;
            // `None`: a wait took this result while its offer was on its
            // way here; the stream moves on to the next one.
            if let Some(result) = offer.take() {
                return Ok(result);
            }
        }
    }

    /// Starts `request` on a pseudo-terminal as a background job (it needs
    /// `jobs.async_enabled`, on by default) and returns a handle to drive it.
    /// Where no terminal can be opened, the command runs without one (with a
    /// notice in its result) and the handle's input calls answer
    /// `not_interactive`.
    ///
    /// # Errors
    /// As [`Session::run`], plus `pty_busy` when the session already runs
    /// `pty.max_running_per_session` terminal runs, and `job_limit_reached`.
    pub async fn start_pty(&self, request: RunRequest) -> Result<PtyHandle> {
        let outcome = self.run(request.pty(true).run_async(true)).await?;
        match outcome {
            RunOutcome::Backgrounded(job) => Ok(PtyHandle::new(self.clone(), job.job_id)),
            RunOutcome::Completed(result) => Ok(PtyHandle::new(self.clone(), result.job_id)),
            _ => Err(Error::actor_gone("job")),
        }
    }

    /// A handle to drive the terminal of a job of this session started with
    /// `pty: true`. Nothing is checked until it is used.
    pub fn pty(&self, job_id: &JobId) -> PtyHandle {
        PtyHandle::new(self.clone(), job_id.clone())
    }

    /// One call on a job's terminal, wherever the session lives.
    pub(crate) async fn pty_call(&self, job_id: &JobId, request: PtyRequest) -> Result<PtyAnswer> {
        if let Some(remote) = self.forwarded()? {
            return remote.pty(job_id.clone(), request).await;
        }
        match request {
            PtyRequest::Write { bytes } => self
                .local_pty(job_id, |reply| PtyCall::Write { bytes, reply })
                .await
                .map(|()| PtyAnswer::Done),
            PtyRequest::Key { name } => self
                .local_pty(job_id, |reply| PtyCall::Key { name, reply })
                .await
                .map(|()| PtyAnswer::Done),
            PtyRequest::Resize { size } => self
                .local_pty(job_id, |reply| PtyCall::Resize { size, reply })
                .await
                .map(|size| PtyAnswer::Size { size }),
            PtyRequest::Screen => self
                .local_pty(job_id, PtyCall::Screen)
                .await
                .map(|screen| PtyAnswer::Screen { screen }),
            PtyRequest::State => self
                .local_pty(job_id, PtyCall::State)
                .await
                .map(|state| PtyAnswer::State { state }),
        }
    }

    async fn local_pty<T: Send + 'static>(
        &self,
        job_id: &JobId,
        call: impl FnOnce(RpcReplyPort<Result<T>>) -> PtyCall,
    ) -> Result<T> {
        let job_id = job_id.clone();
        self.call(
            |reply| SessionMsg::Pty {
                job_id,
                call: call(reply),
            },
            None,
        )
        .await?
    }

    /// Background jobs running in this session (its cap,
    /// `jobs.max_running_per_session`, counts against this). A session in
    /// another process counts 0 here (its node enforces its cap).
    pub fn running_jobs(&self) -> usize {
        self.entry()
            .map(|entry| entry.slots.running_in_session())
            .unwrap_or(0)
    }

    /// Calls the session actor and unwraps ractor's call result.
    async fn call<T: Send + 'static>(
        &self,
        message: impl FnOnce(RpcReplyPort<T>) -> SessionMsg,
        timeout: Option<Duration>,
    ) -> Result<T> {
        self.runtime.check_running()?;
        let actor = self.entry()?.actor;
        match actor.call(message, timeout).await {
            Ok(CallResult::Success(value)) => Ok(value),
            Ok(CallResult::Timeout | CallResult::SenderError) => Err(Error::actor_gone("job")),
            Err(_) => Err(Error::actor_gone("session")),
        }
    }

    /// Subscribes to this session's events: jobs starting and finishing, and
    /// their output as it is produced (coalesced, with byte offsets). A
    /// subscriber that falls behind receives [`SessionEvent::Lagged`] and can
    /// re-read what it missed with [`Session::read_output`]; it never slows a
    /// run down or grows memory.
    pub fn subscribe(&self) -> Subscription {
        if let Backend::Remote(remote) = &self.backend {
            return remote.subscribe();
        }
        let receiver = match self.entry() {
            Ok(entry) => entry.events.subscribe(),
            Err(_) => broadcast::channel(1).0.subscribe(),
        };
        Subscription { receiver }
    }

    /// The local session's actor and channels (an error for a remote one:
    /// every caller has forwarded those already).
    fn entry(&self) -> Result<SessionEntry> {
        match &self.backend {
            Backend::Local(local) => local
                .entry
                .lock()
                .map(|entry| entry.clone())
                .map_err(|_| Error::actor_gone("session handle")),
            Backend::Remote(_) => Err(Error::actor_gone("session (it is remote)")),
        }
    }

    async fn reopen(&self) -> Result<()> {
        let Backend::Local(local) = &self.backend else {
            return Err(Error::actor_gone("session (it is remote)"));
        };
        let entry = self.runtime.open(&self.id, local.options.clone()).await?;
        if let Ok(mut current) = local.entry.lock() {
            *current = entry;
        }
        Ok(())
    }
}

/// A run that has started: its job id now, its outcome later.
#[derive(Debug)]
pub struct RunHandle {
    job_id: JobId,
    outcome: tokio::task::JoinHandle<Result<RunOutcome>>,
}

impl RunHandle {
    /// The run's job id.
    pub fn job_id(&self) -> &JobId {
        &self.job_id
    }

    /// Waits for the run's outcome (what [`Session::run`] would have returned).
    ///
    /// # Errors
    /// As [`Session::run`].
    pub async fn outcome(self) -> Result<RunOutcome> {
        self.outcome
            .await
            .unwrap_or_else(|_| Err(Error::actor_gone("session")))
    }
}

/// A stream of a session's events.
#[derive(Debug)]
pub struct Subscription {
    receiver: broadcast::Receiver<SessionEvent>,
}

/// The sending end of a [`Subscription`] made by [`Subscription::channel`]:
/// how a [`RemoteSession`] delivers the events it forwards.
#[derive(Debug)]
pub struct EventSender {
    sender: broadcast::Sender<SessionEvent>,
}

impl EventSender {
    /// Delivers `event`; `false` once the subscription is dropped.
    pub fn send(&self, event: SessionEvent) -> bool {
        self.sender.send(event).is_ok()
    }

    /// Resolves once the subscription is dropped (stop forwarding then).
    pub async fn closed(&self) {
        self.sender.closed().await;
    }
}

impl Subscription {
    /// A subscription fed by the returned sender, keeping up to `capacity`
    /// events unread (a slower reader gets [`SessionEvent::Lagged`]). It
    /// ends once the sender is dropped.
    pub fn channel(capacity: usize) -> (EventSender, Subscription) {
        let (sender, receiver) = broadcast::channel(capacity.max(1));
        (EventSender { sender }, Subscription { receiver })
    }

    /// The next event; `None` once the session is closed.
    pub async fn recv(&mut self) -> Option<SessionEvent> {
        match self.receiver.recv().await {
            Ok(event) => Some(event),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                Some(SessionEvent::Lagged { missed })
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}
