//! The front door: places each session on one node and routes its calls
//! there, reporting a lost node as `node_lost`, never running a call twice.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use shellvisor::Error;
use shellvisor::JobId;
use shellvisor::JobInfo;
use shellvisor::JobPage;
use shellvisor::JobQuery;
use shellvisor::RunOutcome;
use shellvisor::RunRequest;
use shellvisor::RunResult;
use shellvisor::SessionId;
use tokio::task::JoinSet;

use crate::members::Members;
use crate::options::NatsOptions;
use crate::options::unavailable;
use crate::placement::Placements;
use crate::wire::Call;
use crate::wire::Heartbeat;
use crate::wire::Names;
use crate::wire::Op;
use crate::wire::Placement;
use crate::wire::Reply;
use crate::wire::session_key;

/// How long a call without a deadline of its own may take, and what a
/// run's deadline is given on top for the way there and back.
pub(crate) const CALL_DEADLINE: Duration = Duration::from_secs(3600);
pub(crate) const CALL_SLACK: Duration = Duration::from_secs(10);

/// How a front door behaves.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Where NATS is.
    pub nats: NatsOptions,
    /// A node silent this long is lost (default 3 s).
    pub grace: Duration,
}

impl ClusterOptions {
    /// The NATS at `url`, a 3 s grace.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            nats: NatsOptions::new(url),
            grace: Duration::from_secs(3),
        }
    }
}

/// A connection to a cluster of nodes: [`Cluster::session`] gives a handle
/// whose calls go to the one node that holds the session.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) client: async_nats::Client,
    pub(crate) names: Names,
    pub(crate) members: Members,
    placements: Placements,
    /// Where this front door last placed or found each session: a call
    /// skips the bucket while that node incarnation is live. A route gone
    /// stale (another front door moved the session) is told by the node,
    /// which opens a session only where the bucket places it.
    routes: Routes,
    /// "Your state was lost" notices not shown yet: a session placed anew
    /// by a call that is not a run shows its notice on its next run.
    notices: std::sync::Mutex<std::collections::HashMap<SessionId, String>>,
    /// Event watches being set up, per session: a run waits for them, so
    /// a subscription made before a run sees all of the run's events.
    pub(crate) watches_pending: std::sync::Mutex<
        std::collections::HashMap<SessionId, Vec<tokio::sync::watch::Receiver<bool>>>,
    >,
    /// Sessions opened as a runtime's remote sessions (closed at its
    /// shutdown).
    pub(crate) opened: std::sync::Mutex<std::collections::HashSet<SessionId>>,
    tasks: std::sync::Mutex<JoinSet<()>>,
}

/// Session -> (node, incarnation), as this front door last saw them.
#[derive(Clone, Debug, Default)]
struct Routes(Arc<std::sync::Mutex<std::collections::HashMap<SessionId, (String, String)>>>);

impl Routes {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<SessionId, (String, String)>> {
        // Every update is one insert, remove or retain.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets every route to `node` (it was lost: its sessions move).
    fn forget_node(&self, node: &str) {
        self.lock().retain(|_, (n, _)| n != node);
    }
}

impl Inner {
    /// The node this front door routes `id` to, while that incarnation is live.
    pub(crate) fn live_route(&self, id: &SessionId) -> Option<String> {
        self.routes
            .lock()
            .get(id)
            .filter(|(node, incarnation)| self.members.is_live(node, incarnation))
            .map(|(node, _)| node.clone())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.abort_all();
        }
    }
}

/// One node as the front door knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    /// Its name.
    pub name: String,
    /// Sessions it holds (as it last told).
    pub sessions: usize,
    /// Background jobs it runs.
    pub running_jobs: usize,
    /// Its session cap (0: none).
    pub max_sessions: usize,
    /// It takes no new sessions.
    pub draining: bool,
    /// Its heartbeats stopped.
    pub lost: bool,
    /// Time since its last heartbeat.
    pub silent_for: Duration,
}

impl Cluster {
    /// Connects, and listens for the nodes' heartbeats: until it has heard
    /// one and then for one and a half heartbeat intervals, at most the
    /// grace period.
    ///
    /// # Errors
    /// An invalid prefix; NATS unreachable; no placement bucket (JetStream off).
    pub async fn connect(options: ClusterOptions) -> Result<Cluster, Error> {
        let names = Names::new(&options.nats.prefix)?;
        let client = options.nats.connect("shellvisor-front-door").await?;
        let placements = Placements::open(&client, &names).await?;
        let members = Members::new(options.grace);
        let mut beats = client
            .subscribe(names.heartbeats())
            .await
            .map_err(|err| unavailable(format!("subscribing to heartbeats: {err}")))?;
        let mut tasks = JoinSet::new();
        tasks.spawn({
            let members = members.clone();
            async move {
                while let Some(message) = beats.next().await {
                    if let Ok(beat) = serde_json::from_slice::<Heartbeat>(&message.payload) {
                        members.saw(beat);
                    }
                }
            }
        });
        let routes = Routes::default();
        tasks.spawn(watch_losses(
            client.clone(),
            members.clone(),
            placements.clone(),
            routes.clone(),
            options.grace,
        ));
        let cluster = Cluster {
            inner: Arc::new(Inner {
                client,
                names,
                members,
                placements,
                routes,
                notices: std::sync::Mutex::default(),
                watches_pending: std::sync::Mutex::default(),
                opened: std::sync::Mutex::default(),
                tasks: std::sync::Mutex::new(tasks),
            }),
        };
        // Listens until it has heard a node, then for one full heartbeat
        // interval more (as the nodes tell it), so that every live node has
        // been heard before the first placement: placing on the first node
        // heard would put a burst of new sessions all on it.
        let started = tokio::time::Instant::now();
        let deadline = started + options.grace;
        loop {
            let now = tokio::time::Instant::now();
            let members = &cluster.inner.members;
            let heard_all =
                members.any_live() && now >= started + members.longest_interval() * 3 / 2;
            if heard_all || now >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(cluster)
    }

    /// The session `id`, wherever it lives (it is placed on its first call).
    pub fn session(&self, id: impl Into<SessionId>) -> ClusterSession {
        ClusterSession {
            cluster: self.clone(),
            id: id.into(),
        }
    }

    /// The nodes heard of, by name.
    pub fn nodes(&self) -> Vec<NodeStatus> {
        let now = std::time::Instant::now();
        self.inner
            .members
            .snapshot()
            .into_iter()
            .map(|m| NodeStatus {
                name: m.beat.node,
                sessions: m.beat.sessions,
                running_jobs: m.beat.running_jobs,
                max_sessions: m.beat.max_sessions,
                draining: m.beat.draining,
                lost: m.lost,
                silent_for: now.duration_since(m.last_seen),
            })
            .collect()
    }

    /// The node holding session `id`, if it is placed.
    ///
    /// # Errors
    /// The placement bucket cannot be read.
    pub async fn node_of(&self, id: &SessionId) -> Result<Option<String>, Error> {
        Ok(
            match self
                .inner
                .placements
                .read(&session_key(id.as_str()))
                .await?
            {
                Some((Placement::On { node, .. }, _)) => Some(node),
                _ => None,
            },
        )
    }
}

pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update under these locks is one insert or remove.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A node's answer as `T`.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|err| unavailable(format!("a node's answer: {err}")))
}

/// Marks silent nodes lost, and marks their sessions' placements lost so
/// that their next call starts afresh on a live node (and the node, if it
/// comes back, closes them). While the front door itself is cut off from
/// NATS it cannot tell a silent node from its own silence: nobody is
/// declared lost then, and every node gets a fresh grace period once the
/// connection is back.
async fn watch_losses(
    client: async_nats::Client,
    members: Members,
    placements: Placements,
    routes: Routes,
    grace: Duration,
) {
    let mut tick = tokio::time::interval((grace / 10).max(Duration::from_millis(20)));
    let mut cut_off = false;
    loop {
        tick.tick().await;
        if client.connection_state() != async_nats::connection::State::Connected {
            cut_off = true;
            continue;
        }
        if cut_off {
            cut_off = false;
            members.heard_all_now();
            continue;
        }
        for node in members.expire() {
            tracing::warn!(%node, "node lost: no heartbeat within the grace period");
            routes.forget_node(&node);
            if let Err(err) = mark_lost(&placements, &node).await {
                tracing::warn!(%node, %err, "could not mark the lost node's sessions");
            }
        }
    }
}

async fn mark_lost(placements: &Placements, lost: &str) -> Result<(), Error> {
    for key in placements.keys().await? {
        if let Some((Placement::On { node, .. }, revision)) = placements.read(&key).await?
            && node == lost
        {
            let tombstone = Placement::Lost { node };
            // Lost a race: the session was placed anew meanwhile.
            let _ = placements.write(&key, &tombstone, Some(revision)).await?;
        }
    }
    Ok(())
}

/// A session of a cluster. Its calls go to the node that holds it; if that
/// node is lost, the calls in flight answer `node_lost` and the next call
/// starts a fresh session on a live node, with a notice.
#[derive(Clone, Debug)]
pub struct ClusterSession {
    cluster: Cluster,
    id: SessionId,
}

impl ClusterSession {
    /// The session's id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    pub(crate) fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Runs a command, as [`shellvisor::Session::run`] does.
    ///
    /// # Errors
    /// What the node answers; `node_lost` when the node was lost before it
    /// answered (the command may or may not have run; it is not retried);
    /// `cluster_unavailable` when NATS is unreachable, no node can take the
    /// session, or no answer came by the run's deadline.
    pub async fn run(&self, request: RunRequest) -> Result<RunOutcome, Error> {
        let deadline = request
            .timeout
            .map_or(CALL_DEADLINE, |secs| Duration::from_secs(secs) + CALL_SLACK);
        let op = Op::Run {
            request: Box::new(request),
        };
        self.watches_ready().await;
        let (value, _) = self.routed(op, deadline).await?;
        let outcome: RunOutcome = decode(value)?;
        Ok(self.with_notice(outcome))
    }

    /// `outcome`, with the notice that the session's state was lost first
    /// in its text, if one is waiting to be shown.
    pub(crate) fn with_notice(&self, mut outcome: RunOutcome) -> RunOutcome {
        let notices = &self.cluster.inner.notices;
        let waiting = lock(notices).remove(&self.id);
        match (waiting, &mut outcome) {
            (Some(notice), RunOutcome::Completed(result)) => {
                result.text = format!("{notice}\n\n{}", result.text);
                result.notices.insert(0, notice);
            }
            (Some(notice), RunOutcome::Backgrounded(run)) => {
                run.text = format!("{notice}\n\n{}", run.text);
            }
            (Some(notice), _) => {
                lock(notices).insert(self.id.clone(), notice);
            }
            (None, _) => {}
        }
        outcome
    }

    /// Waits (5 s at most) for the event watches being set up on this
    /// session, so a subscription made before a run sees its first events.
    pub(crate) async fn watches_ready(&self) {
        let pending = lock(&self.cluster.inner.watches_pending).remove(&self.id);
        for mut ready in pending.into_iter().flatten() {
            let _ = tokio::time::timeout(Duration::from_secs(5), ready.wait_for(|r| *r)).await;
        }
    }

    /// Sends `op` to the session's node, placing the session first if it
    /// has no live home, and answers with the node's answer and name. A
    /// node that does not hold the session and is not its home in the
    /// bucket ran nothing: the route is read again, once. A notice that the
    /// session's state was lost waits for the session's next run.
    pub(crate) async fn routed(
        &self,
        op: Op,
        deadline: Duration,
    ) -> Result<(serde_json::Value, String), Error> {
        let inner = &self.cluster.inner;
        let node = match inner.live_route(&self.id) {
            Some(node) => node,
            None => self.place().await?,
        };
        let payload = Call::payload(self.id.as_str(), &op)?;
        match self.call(&node, payload, deadline).await {
            Err(err) if err.code() == shellvisor::ErrorCode::SessionNotFound => {
                inner.routes.lock().remove(&self.id);
                let node = self.place().await?;
                let payload = Call::payload(self.id.as_str(), &op)?;
                Ok((self.call(&node, payload, deadline).await?, node))
            }
            answered => Ok((answered?, node)),
        }
    }

    /// A job's state, as [`shellvisor::Session::job`] gives it.
    ///
    /// # Errors
    /// `job_not_found`; `node_lost` when the session's node was lost (its
    /// jobs went with it); as [`ClusterSession::run`].
    pub async fn job(&self, job_id: &JobId) -> Result<JobInfo, Error> {
        let op = Op::Job {
            job_id: job_id.to_string(),
        };
        decode(self.on_home(op, CALL_SLACK).await?)
    }

    /// A page of the session's jobs, as [`shellvisor::Session::jobs_page`].
    ///
    /// # Errors
    /// As [`ClusterSession::job`].
    pub async fn jobs_page(&self, query: JobQuery) -> Result<JobPage, Error> {
        decode(self.on_home(Op::Jobs { query }, CALL_SLACK).await?)
    }

    /// Waits up to `timeout` for a job's result, as
    /// [`shellvisor::Session::wait`] does (`None`: still running).
    ///
    /// # Errors
    /// As [`ClusterSession::job`].
    pub async fn wait(
        &self,
        job_id: &JobId,
        timeout: Duration,
    ) -> Result<Option<RunResult>, Error> {
        let op = Op::Wait {
            job_id: job_id.to_string(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        decode(self.on_home(op, timeout + CALL_SLACK).await?)
    }

    /// Kills a job, as [`shellvisor::Session::kill`] does.
    ///
    /// # Errors
    /// As [`ClusterSession::job`].
    pub async fn kill(&self, job_id: &JobId) -> Result<(), Error> {
        let op = Op::Kill {
            job_id: job_id.to_string(),
        };
        decode(self.on_home(op, CALL_SLACK).await?)
    }

    /// Sends `op` to the session's current home without placing it: a
    /// session never placed has no jobs, and one whose node was lost lost
    /// them (`node_lost`, until its next run starts it afresh).
    pub(crate) async fn on_home(
        &self,
        op: Op,
        deadline: Duration,
    ) -> Result<serde_json::Value, Error> {
        let inner = &self.cluster.inner;
        if let Some(node) = inner.live_route(&self.id) {
            let payload = Call::payload(self.id.as_str(), &op)?;
            match self.call(&node, payload, deadline).await {
                // An outdated route: the node ran nothing; ask the bucket.
                Err(err) if err.code() == shellvisor::ErrorCode::SessionNotFound => {
                    inner.routes.lock().remove(&self.id);
                }
                answered => return answered,
            }
        }
        let node = match inner
            .placements
            .read(&session_key(self.id.as_str()))
            .await?
        {
            Some((Placement::On { node, incarnation }, _))
                if inner.members.is_live(&node, &incarnation) =>
            {
                inner
                    .routes
                    .lock()
                    .insert(self.id.clone(), (node.clone(), incarnation));
                node
            }
            Some((Placement::On { node, .. } | Placement::Lost { node }, _)) => {
                return Err(Error::NodeLost { node });
            }
            None => {
                return Err(Error::SessionNotFound {
                    id: self.id.to_string(),
                });
            }
        };
        let payload = Call::payload(self.id.as_str(), &op)?;
        self.call(&node, payload, deadline).await
    }

    /// Closes the session on its node and forgets its placement.
    ///
    /// # Errors
    /// As [`ClusterSession::run`].
    pub async fn close(&self) -> Result<(), Error> {
        let inner = &self.cluster.inner;
        inner.routes.lock().remove(&self.id);
        let key = session_key(self.id.as_str());
        if let Some((Placement::On { node, incarnation }, _)) = inner.placements.read(&key).await?
            && inner.members.is_live(&node, &incarnation)
        {
            let payload = Call::payload(self.id.as_str(), &Op::Close)?;
            self.call(&node, payload, CALL_SLACK).await?;
        }
        inner.placements.remove(&key).await
    }

    /// The node for the next call. When the session's state was lost with
    /// its previous node, a notice saying so waits for its next run.
    async fn place(&self) -> Result<String, Error> {
        let inner = &self.cluster.inner;
        let key = session_key(self.id.as_str());
        for _ in 0..16 {
            let read = inner.placements.read(&key).await?;
            let lost_node = match &read {
                Some((Placement::On { node, incarnation }, _))
                    if inner.members.is_live(node, incarnation) =>
                {
                    inner
                        .routes
                        .lock()
                        .insert(self.id.clone(), (node.clone(), incarnation.clone()));
                    return Ok(node.clone());
                }
                Some((Placement::On { node, .. } | Placement::Lost { node }, _)) => {
                    Some(node.clone())
                }
                None => None,
            };
            let Some((node, incarnation)) = inner.members.place() else {
                return Err(unavailable(
                    "no live node can take the session (none heard of, all full or draining)"
                        .to_owned(),
                ));
            };
            let placement = Placement::On {
                node: node.clone(),
                incarnation: incarnation.clone(),
            };
            if inner
                .placements
                .write(&key, &placement, read.map(|(_, revision)| revision))
                .await?
            {
                inner
                    .routes
                    .lock()
                    .insert(self.id.clone(), (node.clone(), incarnation));
                if let Some(lost) = lost_node {
                    let notice = format!(
                        "The session's previous node ({lost}) was lost: this is a fresh session on node {node}; its working directory, variables and jobs are gone."
                    );
                    lock(&inner.notices).insert(self.id.clone(), notice);
                }
                return Ok(node);
            }
        }
        Err(unavailable(
            "the session's placement kept changing under concurrent writers".to_owned(),
        ))
    }

    /// Sends one call (`payload`, a fresh call id each time) to `node` and
    /// waits for its answer, the node's loss, or the deadline.
    pub(crate) async fn call(
        &self,
        node: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<serde_json::Value, Error> {
        let inner = &self.cluster.inner;
        let losses = inner.members.losses_of(node).unwrap_or(0);
        let request = async_nats::Request::new()
            .payload(payload)
            .timeout(Some(deadline));
        let sent = inner.client.send_request(inner.names.calls(node), request);
        let message = tokio::select! {
            answer = sent => answer,
            () = inner.members.lost_after(node, losses) => {
                return Err(Error::NodeLost { node: node.to_owned() });
            }
        };
        let message = match message {
            Ok(message) => message,
            Err(err) => {
                return Err(match err.kind() {
                    async_nats::RequestErrorKind::NoResponders => Error::NodeLost {
                        node: node.to_owned(),
                    },
                    async_nats::RequestErrorKind::TimedOut => unavailable(format!(
                        "node {node} did not answer within {} s",
                        deadline.as_secs()
                    )),
                    _ => unavailable(format!("calling node {node}: {err}")),
                });
            }
        };
        let reply: Reply = serde_json::from_slice(&message.payload)
            .map_err(|err| unavailable(format!("node {node} answered garbage: {err}")))?;
        reply.result.map_err(Error::from)
    }
}
