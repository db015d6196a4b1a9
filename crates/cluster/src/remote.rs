//! A cluster as the sessions of a [`shellvisor::Runtime`]: with
//! `Runtime::builder(config).remote_sessions(cluster)`, hosts built on the
//! runtime (the MCP and JSON-RPC servers, embedders) serve the cluster's
//! sessions with no change of their own.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use shellvisor::Error;
use shellvisor::JobId;
use shellvisor::JobInfo;
use shellvisor::JobPage;
use shellvisor::JobQuery;
use shellvisor::OutputChunk;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::SessionId;
use shellvisor::SessionOptions;
use shellvisor::Subscription;
use shellvisor::remote::PtyAnswer;
use shellvisor::remote::PtyRequest;
use shellvisor::remote::RemoteFuture;
use shellvisor::remote::RemoteSession;
use shellvisor::remote::RemoteSessions;
use shellvisor::remote::StartedRun;

use crate::front::CALL_DEADLINE;
use crate::front::CALL_SLACK;
use crate::front::Cluster;
use crate::front::ClusterSession;
use crate::front::decode;
use crate::front::lock;
use crate::options::unavailable;
use crate::wire::Op;
use crate::wire::Reply;

/// How long a node forwards a session's events without hearing again, and
/// how often a live subscription tells it again.
const WATCH_LEASE: Duration = Duration::from_secs(30);
const WATCH_RENEW: Duration = Duration::from_secs(10);
/// Events a subscription keeps unread before its reader lags.
const EVENTS_KEPT: usize = 1024;
/// How long one node-side wait for a completion lasts (a caller that stops
/// waiting loses at most the completion this wait took; the job stays
/// listed with its result).
const COMPLETION_POLL: Duration = Duration::from_secs(10);

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A run's deadline on the wire: its timeout and the way there and back.
fn run_deadline(request: &RunRequest) -> Duration {
    request
        .timeout
        .map_or(CALL_DEADLINE, |secs| Duration::from_secs(secs) + CALL_SLACK)
}

impl ClusterSession {
    /// Opens the session on its node (placing it), set up by `options` if
    /// this creates it. A session this front door routes to a live node is
    /// open already: nothing is sent.
    ///
    /// # Errors
    /// As [`ClusterSession::run`].
    pub async fn open(&self, options: SessionOptions) -> Result<(), Error> {
        if options == SessionOptions::default()
            && self.cluster().inner.live_route(self.id()).is_some()
        {
            return Ok(());
        }
        self.routed(Op::Open { options }, CALL_SLACK).await?;
        Ok(())
    }

    /// Starts a run, as [`shellvisor::Session::start_run`] does: answers
    /// with its job id once it exists, and a future of its outcome.
    ///
    /// # Errors
    /// As [`ClusterSession::run`].
    pub async fn start_run(
        &self,
        request: RunRequest,
    ) -> Result<(JobId, RemoteFuture<'static, RunOutcome>), Error> {
        let inner = Arc::clone(&self.cluster().inner);
        let deadline = run_deadline(&request);
        let outcome_to = inner.names.stream("outcome")?;
        let mut outcomes = inner
            .client
            .subscribe(outcome_to.clone())
            .await
            .map_err(|err| unavailable(format!("subscribing to a run's outcome: {err}")))?;
        self.watches_ready().await;
        let op = Op::Start {
            request: Box::new(request),
            outcome_to,
        };
        let (value, node) = self.routed(op, CALL_SLACK).await?;
        let losses = inner.members.losses_of(&node).unwrap_or(0);
        let job_id: JobId = decode(value)?;
        let session = self.clone();
        let outcome = async move {
            let message = tokio::select! {
                message = tokio::time::timeout(deadline, outcomes.next()) => message,
                () = inner.members.lost_after(&node, losses) => {
                    return Err(Error::NodeLost { node });
                }
            };
            let message = match message {
                Ok(Some(message)) => message,
                Ok(None) => return Err(unavailable("the run's outcome stream ended".to_owned())),
                Err(_) => {
                    return Err(unavailable(format!(
                        "node {node} sent no outcome within {} s",
                        deadline.as_secs()
                    )));
                }
            };
            let reply: Reply = serde_json::from_slice(&message.payload)
                .map_err(|err| unavailable(format!("node {node} answered garbage: {err}")))?;
            let outcome: RunOutcome = decode(reply.result.map_err(Error::from)?)?;
            Ok(session.with_notice(outcome))
        };
        Ok((job_id, Box::pin(outcome)))
    }

    /// Raw output bytes of a job, as [`shellvisor::Session::read_output`].
    ///
    /// # Errors
    /// As [`ClusterSession::job`].
    pub async fn read_output(
        &self,
        job_id: &JobId,
        offset: u64,
        max: usize,
    ) -> Result<OutputChunk, Error> {
        let op = Op::ReadOutput {
            job_id: job_id.to_string(),
            offset,
            max,
        };
        decode(self.on_home(op, CALL_SLACK).await?)
    }

    /// Waits for the first of several jobs, as
    /// [`shellvisor::Session::wait_any`] does.
    ///
    /// # Errors
    /// As [`ClusterSession::job`].
    pub async fn wait_any(
        &self,
        job_ids: &[JobId],
        timeout: Duration,
    ) -> Result<Option<RunResult>, Error> {
        let op = Op::WaitAny {
            job_ids: job_ids.iter().map(ToString::to_string).collect(),
            timeout_ms: millis(timeout),
        };
        decode(self.on_home(op, timeout + CALL_SLACK).await?)
    }

    /// The next background result nobody took, as
    /// [`shellvisor::Session::next_completion`] (waits until one comes).
    ///
    /// # Errors
    /// As [`ClusterSession::job`].
    pub async fn next_completion(&self) -> Result<RunResult, Error> {
        loop {
            let op = Op::NextCompletion {
                timeout_ms: millis(COMPLETION_POLL),
            };
            let taken: Option<RunResult> =
                decode(self.on_home(op, COMPLETION_POLL + CALL_SLACK).await?)?;
            if let Some(result) = taken {
                return Ok(result);
            }
        }
    }

    /// One call on a job's terminal, as [`shellvisor::PtyHandle::call`].
    ///
    /// # Errors
    /// As [`ClusterSession::job`].
    pub async fn pty(&self, job_id: &JobId, call: PtyRequest) -> Result<PtyAnswer, Error> {
        let op = Op::Pty {
            job_id: job_id.to_string(),
            call,
        };
        decode(self.on_home(op, CALL_SLACK).await?)
    }

    /// The session's events from now on, as [`shellvisor::Session::subscribe`]:
    /// the node forwards them while the subscription lives. A run started
    /// through this front door after this call sees all of its events. The
    /// stream ends when the session is closed or its node is lost (or, for
    /// a session never placed, at once).
    pub fn subscribe(&self) -> Subscription {
        let (sender, subscription) = Subscription::channel(EVENTS_KEPT);
        let (ready, ready_rx) = tokio::sync::watch::channel(false);
        lock(&self.cluster().inner.watches_pending)
            .entry(self.id().clone())
            .or_default()
            .push(ready_rx);
        let session = self.clone();
        tokio::spawn(async move {
            let inner = &session.cluster().inner;
            let Ok(to) = inner.names.stream("events") else {
                return;
            };
            let Ok(mut events) = inner.client.subscribe(to.clone()).await else {
                return;
            };
            let mut renew = tokio::time::interval(WATCH_RENEW);
            let mut ready = Some(ready);
            loop {
                tokio::select! {
                    _ = renew.tick() => {
                        let op = Op::Watch { to: to.clone(), lease_ms: millis(WATCH_LEASE) };
                        let watched = session.on_home(op, CALL_SLACK).await;
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(true);
                        }
                        if let Err(err) = watched {
                            tracing::debug!(%err, "a session's event watch ended");
                            return;
                        }
                    }
                    message = events.next() => {
                        let Some(message) = message else { return };
                        if let Ok(event) = serde_json::from_slice(&message.payload)
                            && !sender.send(event)
                        {
                            return;
                        }
                    }
                    () = sender.closed() => return,
                }
            }
        });
        subscription
    }
}

impl RemoteSessions for Cluster {
    fn open(
        &self,
        id: SessionId,
        options: SessionOptions,
    ) -> RemoteFuture<'_, Arc<dyn RemoteSession>> {
        Box::pin(async move {
            let session = self.session(id.clone());
            session.open(options).await?;
            lock(&self.inner.opened).insert(id);
            Ok(Arc::new(session) as Arc<dyn RemoteSession>)
        })
    }

    fn close(&self, id: SessionId) -> RemoteFuture<'_, ()> {
        Box::pin(async move {
            lock(&self.inner.opened).remove(&id);
            self.session(id).close().await
        })
    }

    fn close_all(&self) -> RemoteFuture<'_, ()> {
        Box::pin(async move {
            let opened: Vec<SessionId> = lock(&self.inner.opened).drain().collect();
            let closes = opened
                .into_iter()
                .map(|id| async move { self.session(id).close().await });
            futures_util::future::join_all(closes)
                .await
                .into_iter()
                .find_map(Result::err)
                .map_or(Ok(()), Err)
        })
    }

    fn running_jobs(&self) -> usize {
        self.nodes()
            .iter()
            .filter(|node| !node.lost)
            .map(|node| node.running_jobs)
            .sum()
    }
}

impl RemoteSession for ClusterSession {
    fn run(&self, request: RunRequest) -> RemoteFuture<'_, RunOutcome> {
        Box::pin(ClusterSession::run(self, request))
    }

    fn start_run(&self, request: RunRequest) -> RemoteFuture<'_, StartedRun> {
        Box::pin(async move {
            let (job_id, outcome) = ClusterSession::start_run(self, request).await?;
            Ok(StartedRun { job_id, outcome })
        })
    }

    fn read_output(&self, job_id: JobId, offset: u64, max: usize) -> RemoteFuture<'_, OutputChunk> {
        Box::pin(async move { ClusterSession::read_output(self, &job_id, offset, max).await })
    }

    fn jobs_page(&self, query: JobQuery) -> RemoteFuture<'_, JobPage> {
        Box::pin(ClusterSession::jobs_page(self, query))
    }

    fn job(&self, job_id: JobId) -> RemoteFuture<'_, JobInfo> {
        Box::pin(async move { ClusterSession::job(self, &job_id).await })
    }

    fn wait_any(
        &self,
        job_ids: Vec<JobId>,
        timeout: Duration,
    ) -> RemoteFuture<'_, Option<RunResult>> {
        Box::pin(async move { ClusterSession::wait_any(self, &job_ids, timeout).await })
    }

    fn kill(&self, job_id: JobId) -> RemoteFuture<'_, ()> {
        Box::pin(async move { ClusterSession::kill(self, &job_id).await })
    }

    fn next_completion(&self) -> RemoteFuture<'_, RunResult> {
        Box::pin(ClusterSession::next_completion(self))
    }

    fn pty(&self, job_id: JobId, call: PtyRequest) -> RemoteFuture<'_, PtyAnswer> {
        Box::pin(async move { ClusterSession::pty(self, &job_id, call).await })
    }

    fn subscribe(&self) -> Subscription {
        ClusterSession::subscribe(self)
    }
}
