//! A node: one runtime serving its sessions over NATS.

use std::collections::HashMap;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use shellvisor::Error;
use shellvisor::JobId;
use shellvisor::Runtime;
use shellvisor::SessionId;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::options::NatsOptions;
use crate::options::unavailable;
use crate::placement::PlacementWatch;
use crate::placement::Placements;
use crate::wire::Call;
use crate::wire::Heartbeat;
use crate::wire::Names;
use crate::wire::Op;
use crate::wire::Placement;
use crate::wire::Reply;
use crate::wire::WireError;
use crate::wire::check_node_name;
use crate::wire::key_session;
use crate::wire::random_hex;
use crate::wire::session_key;

/// Call ids a node remembers (a redelivered call older than this many
/// calls would run again; NATS does not redeliver core requests at all).
const SEEN_CALLS: usize = 1 << 16;
/// How long a draining node waits for the calls it is running.
const DRAIN_DEADLINE: Duration = Duration::from_secs(30);

/// How a node runs.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Where NATS is.
    pub nats: NatsOptions,
    /// The node's name (letters, digits, `-`, `_`), unique in the cluster.
    pub name: String,
    /// Sessions it takes at most (0: no cap beyond the runtime's own).
    pub max_sessions: usize,
    /// How often it tells the cluster it is alive.
    pub heartbeat: Duration,
}

impl NodeOptions {
    /// A node called `name` on the NATS at `url`, no session cap,
    /// heartbeats every 500 ms.
    pub fn new(url: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            nats: NatsOptions::new(url),
            name: name.into(),
            max_sessions: 0,
            heartbeat: Duration::from_millis(500),
        }
    }
}

/// A runtime serving its sessions as a NATS service: calls on
/// `<prefix>.node.<name>.call`, heartbeats on `<prefix>.heartbeat.<name>`.
/// Each call runs at most once (a node refuses a call id it has seen), and
/// a session this node holds but the placement bucket gives to another node
/// (this node was declared lost meanwhile) is closed: its processes die.
#[derive(Debug)]
pub struct Node {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    /// The call loop (it ends once the node drains and its calls are done).
    serving: tokio::task::JoinHandle<()>,
    /// Heartbeats and the placement watch (they go on while it drains).
    tasks: JoinSet<()>,
}

#[derive(Debug)]
struct Shared {
    placements: Placements,
    runtime: Runtime,
    client: async_nats::Client,
    names: Names,
    name: String,
    incarnation: String,
    max_sessions: usize,
    served: Mutex<HashSet<String>>,
    seen: Mutex<SeenCalls>,
    draining: watch::Sender<bool>,
    /// Runs started by `Start` whose outcome is still to be published
    /// (a drain waits for them as for calls).
    outcomes: Mutex<JoinSet<()>>,
    /// How often it beats.
    heartbeat: Duration,
    /// Event forwarders by destination subject, each with its lease's end.
    watches: Mutex<HashMap<String, watch::Sender<tokio::time::Instant>>>,
}

#[derive(Debug, Default)]
struct SeenCalls {
    ids: HashSet<String>,
    order: VecDeque<String>,
}

impl SeenCalls {
    /// Records `id`; `false` if it was seen already.
    fn first_time(&mut self, id: &str) -> bool {
        if !self.ids.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > SEEN_CALLS
            && let Some(old) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
        true
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update under these locks is a single insert or remove.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Node {
    /// Connects to NATS and starts serving `runtime`'s sessions.
    ///
    /// # Errors
    /// An invalid name or prefix; NATS unreachable; the placement bucket
    /// cannot be opened (JetStream off).
    pub async fn start(runtime: Runtime, options: NodeOptions) -> Result<Node, Error> {
        check_node_name(&options.name)?;
        let names = Names::new(&options.nats.prefix)?;
        let client = options
            .nats
            .connect(&format!("shellvisor-node-{}", options.name))
            .await?;
        let placements = Placements::open(&client, &names).await?;
        let calls = client
            .subscribe(names.calls(&options.name))
            .await
            .map_err(|err| unavailable(format!("subscribing to calls: {err}")))?;
        let watch = placements.watch().await?;
        let shared = Arc::new(Shared {
            placements,
            runtime,
            client,
            names,
            name: options.name,
            incarnation: random_hex(8)?,
            max_sessions: options.max_sessions,
            served: Mutex::new(HashSet::new()),
            seen: Mutex::new(SeenCalls::default()),
            draining: watch::channel(false).0,
            outcomes: Mutex::new(JoinSet::new()),
            heartbeat: options.heartbeat,
            watches: Mutex::new(HashMap::new()),
        });
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let serving = tokio::spawn(serve(Arc::clone(&shared), calls));
        tasks.spawn(heartbeats(
            Arc::clone(&shared),
            options.heartbeat,
            stopped.clone(),
        ));
        tasks.spawn(enforce_placements(Arc::clone(&shared), watch, stopped));
        tracing::info!(node = %shared.name, "node serving");
        Ok(Node {
            shared,
            stop,
            serving,
            tasks,
        })
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Stops taking calls and tells the cluster it drains (its heartbeats
    /// go on, so nobody declares it lost meanwhile), lets the calls in
    /// progress finish (30 s at most), then shuts the runtime down.
    pub async fn drain(mut self) {
        self.shared.draining.send_replace(true);
        beat(&self.shared).await;
        if tokio::time::timeout(DRAIN_DEADLINE, &mut self.serving)
            .await
            .is_err()
        {
            tracing::warn!(node = %self.shared.name, "calls still running after the drain deadline");
            self.serving.abort();
        }
        let mut outcomes = std::mem::take(&mut *lock(&self.shared.outcomes));
        let waited = tokio::time::timeout(DRAIN_DEADLINE, async {
            while outcomes.join_next().await.is_some() {}
        })
        .await;
        if waited.is_err() {
            tracing::warn!(node = %self.shared.name, "runs still going after the drain deadline");
        }
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        beat(&self.shared).await;
        let _ = self.shared.client.flush().await;
        self.shared.runtime.shutdown().await;
    }
}

/// Takes calls until the node drains, each in its own task; then
/// unsubscribes and waits for the calls in progress.
async fn serve(shared: Arc<Shared>, mut calls: async_nats::Subscriber) {
    let mut stopped = shared.draining.subscribe();
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            message = calls.next() => {
                let Some(message) = message else { break };
                running.spawn(answer(Arc::clone(&shared), message));
            }
            _ = stopped.wait_for(|stop| *stop) => break,
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    let _ = calls.unsubscribe().await;
    while running.join_next().await.is_some() {}
}

/// Runs one call and answers it.
async fn answer(shared: Arc<Shared>, message: async_nats::Message) {
    let Some(reply_to) = message.reply.clone() else {
        tracing::debug!("a call without a reply subject; dropped");
        return;
    };
    let result = match serde_json::from_slice::<Call>(&message.payload) {
        Ok(call) => shared.call(call).await,
        Err(err) => Err(Error::InvalidRequest {
            message: format!("malformed call: {err}"),
        }),
    };
    shared.publish_reply(reply_to.to_string(), result).await;
}

/// The longest lease an event watch gets per renewal.
const MAX_WATCH_LEASE: Duration = Duration::from_secs(60);
/// The longest a node-side wait for a completion takes per call.
const MAX_COMPLETION_WAIT: Duration = Duration::from_secs(60);

impl Shared {
    async fn call(self: &Arc<Self>, call: Call) -> Result<serde_json::Value, Error> {
        if !lock(&self.seen).first_time(&call.id) {
            return Err(Error::InvalidRequest {
                message: format!("call {} was received before; it is not run twice", call.id),
            });
        }
        match call.op {
            Op::Run { request } => {
                let session = self.open(&call.session).await?;
                encode(session.run(*request).await?)
            }
            Op::Open { options } => {
                self.open_with(&call.session, options).await?;
                Ok(serde_json::Value::Null)
            }
            Op::Close => {
                self.close(&call.session).await;
                Ok(serde_json::Value::Null)
            }
            Op::Job { job_id } => {
                let session = self.open(&call.session).await?;
                encode(session.job(&JobId::new(job_id)).await?)
            }
            Op::Jobs { query } => {
                let session = self.open(&call.session).await?;
                encode(session.jobs_page(query).await?)
            }
            Op::Wait { job_id, timeout_ms } => {
                let session = self.open(&call.session).await?;
                let timeout = Duration::from_millis(timeout_ms);
                encode(session.wait(&JobId::new(job_id), timeout).await?)
            }
            Op::Kill { job_id } => {
                let session = self.open(&call.session).await?;
                encode(session.kill(&JobId::new(job_id)).await?)
            }
            Op::Start {
                request,
                outcome_to,
            } => {
                if !self.names.is_stream(&outcome_to) {
                    return Err(bad_stream(&outcome_to));
                }
                let session = self.open(&call.session).await?;
                let run = session.start_run(*request).await?;
                let job_id = run.job_id().clone();
                let shared = Arc::clone(self);
                lock(&self.outcomes).spawn(async move {
                    let outcome = run.outcome().await;
                    shared
                        .publish_reply(outcome_to, outcome.and_then(encode))
                        .await;
                });
                encode(job_id)
            }
            Op::ReadOutput {
                job_id,
                offset,
                max,
            } => {
                let session = self.open(&call.session).await?;
                let chunk = session
                    .read_output(&JobId::new(job_id), offset, max)
                    .await?;
                encode(chunk)
            }
            Op::WaitAny {
                job_ids,
                timeout_ms,
            } => {
                let session = self.open(&call.session).await?;
                let job_ids: Vec<JobId> = job_ids.into_iter().map(JobId::new).collect();
                let timeout = Duration::from_millis(timeout_ms);
                encode(session.wait_any(&job_ids, timeout).await?)
            }
            Op::NextCompletion { timeout_ms } => {
                let session = self.open(&call.session).await?;
                let timeout = Duration::from_millis(timeout_ms).min(MAX_COMPLETION_WAIT);
                match tokio::time::timeout(timeout, session.next_completion()).await {
                    Ok(result) => encode(Some(result?)),
                    Err(_) => encode(None::<shellvisor::RunResult>),
                }
            }
            Op::Pty { job_id, call: pty } => {
                let session = self.open(&call.session).await?;
                encode(session.pty(&JobId::new(job_id)).call(pty).await?)
            }
            Op::Watch { to, lease_ms } => {
                if !self.names.is_stream(&to) {
                    return Err(bad_stream(&to));
                }
                let session = self.open(&call.session).await?;
                let lease = Duration::from_millis(lease_ms).min(MAX_WATCH_LEASE);
                self.watch(&session, to, lease);
                Ok(serde_json::Value::Null)
            }
        }
    }

    /// Publishes a reply: to a call, or a run's outcome to the stream
    /// subject a front door listens on.
    async fn publish_reply(&self, to: String, result: Result<serde_json::Value, Error>) {
        let reply = Reply {
            result: result.map_err(|err| WireError::from(&err)),
        };
        match serde_json::to_vec(&reply) {
            Ok(bytes) => {
                if let Err(err) = self.client.publish(to, Bytes::from(bytes)).await {
                    tracing::warn!(%err, "could not send a reply");
                }
            }
            Err(err) => tracing::warn!(%err, "could not encode a reply"),
        }
    }

    /// Forwards `session`'s events to `to` until the lease ends unrenewed
    /// or the session closes; a watch already forwarding there is renewed.
    fn watch(self: &Arc<Self>, session: &shellvisor::Session, to: String, lease: Duration) {
        let until = tokio::time::Instant::now() + lease;
        let mut watches = lock(&self.watches);
        if let Some(renew) = watches.get(&to)
            && renew.send(until).is_ok()
        {
            return;
        }
        let (renew, mut lease_end) = watch::channel(until);
        watches.insert(to.clone(), renew);
        drop(watches);
        let mut events = session.subscribe();
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let end = *lease_end.borrow_and_update();
                tokio::select! {
                    event = events.recv() => {
                        let Some(event) = event else { break };
                        let Ok(bytes) = serde_json::to_vec(&event) else { continue };
                        if shared.client.publish(to.clone(), Bytes::from(bytes)).await.is_err() {
                            break;
                        }
                    }
                    () = tokio::time::sleep_until(end) => {
                        if *lease_end.borrow() <= end {
                            break;
                        }
                    }
                }
            }
            // Only this forwarder's entry (a later watch to the same subject
            // has its own live receiver).
            drop(lease_end);
            let mut watches = lock(&shared.watches);
            if watches.get(&to).is_some_and(watch::Sender::is_closed) {
                watches.remove(&to);
            }
        });
    }

    /// The session `id`, opened here if this node does not hold it yet.
    async fn open(&self, id: &str) -> Result<shellvisor::Session, Error> {
        self.open_with(id, shellvisor::SessionOptions::default())
            .await
    }

    /// The session `id`, opened here (set up by `options`) if this node
    /// does not hold it yet.
    async fn open_with(
        &self,
        id: &str,
        options: shellvisor::SessionOptions,
    ) -> Result<shellvisor::Session, Error> {
        let draining = *self.draining.borrow();
        if draining {
            return Err(Error::ShuttingDown);
        }
        let held = lock(&self.served).contains(id);
        if !held {
            // A session is opened only where the bucket places it: a front
            // door with an outdated route learns it here, before anything ran.
            let placed = self.placements.read(&session_key(id)).await?;
            let ours = matches!(
                &placed,
                Some((Placement::On { node, incarnation }, _))
                    if *node == self.name && *incarnation == self.incarnation
            );
            if !ours {
                return Err(Error::SessionNotFound {
                    id: format!("{id} (not placed on node {})", self.name),
                });
            }
            let mut served = lock(&self.served);
            if !served.contains(id) {
                if self.max_sessions > 0 && served.len() >= self.max_sessions {
                    return Err(Error::SessionLimitReached {
                        limit: self.max_sessions,
                    });
                }
                served.insert(id.to_owned());
            }
        }
        match self
            .runtime
            .session_with(SessionId::from(id), options)
            .await
        {
            Ok(session) => Ok(session),
            Err(err) => {
                lock(&self.served).remove(id);
                Err(err)
            }
        }
    }

    async fn close(&self, id: &str) {
        let held = lock(&self.served).remove(id);
        if held {
            self.runtime.close_session(SessionId::from(id)).await;
        }
    }
}

fn bad_stream(subject: &str) -> Error {
    Error::InvalidRequest {
        message: format!("{subject:?} is not a stream subject of this deployment"),
    }
}

/// An answer as JSON.
fn encode(value: impl serde::Serialize) -> Result<serde_json::Value, Error> {
    serde_json::to_value(value).map_err(|err| Error::InvalidRequest {
        message: format!("encoding the answer: {err}"),
    })
}

/// Publishes a heartbeat every `every` until stopped.
async fn heartbeats(shared: Arc<Shared>, every: Duration, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.wait_for(|stop| *stop) => return,
        }
        beat(&shared).await;
    }
}

async fn beat(shared: &Shared) {
    let draining = *shared.draining.borrow();
    let beat = Heartbeat {
        node: shared.name.clone(),
        incarnation: shared.incarnation.clone(),
        sessions: lock(&shared.served).len(),
        running_jobs: shared.runtime.running_jobs(),
        max_sessions: shared.max_sessions,
        draining,
        every_ms: u64::try_from(shared.heartbeat.as_millis()).unwrap_or(u64::MAX),
    };
    match serde_json::to_vec(&beat) {
        Ok(bytes) => {
            if let Err(err) = shared
                .client
                .publish(shared.names.heartbeat(&shared.name), Bytes::from(bytes))
                .await
            {
                tracing::debug!(%err, "heartbeat not sent");
            }
        }
        Err(err) => tracing::warn!(%err, "could not encode a heartbeat"),
    }
}

/// Closes every session this node holds that the placement bucket gives to
/// another node (or marks lost): this node was declared lost while it was
/// unreachable, and the cluster has moved on. The bucket's changes are
/// watched; when the watch breaks (this node was frozen or cut off past the
/// server's heartbeats), it is opened again and every session held is
/// checked against the bucket, so no change in the gap is missed.
async fn enforce_placements(
    shared: Arc<Shared>,
    mut watch: PlacementWatch,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let change = tokio::select! {
            change = watch.next() => change,
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        match change {
            Some((key, placement)) => {
                if let Some(session) = key_session(&key) {
                    shared.enforce(&session, placement.as_ref()).await;
                }
            }
            None => {
                tracing::debug!("the placement watch broke; opening it again");
                let reopened = tokio::select! {
                    reopened = reopen(&shared) => reopened,
                    _ = stopped.wait_for(|stop| *stop) => return,
                };
                watch = reopened;
                shared.reconcile().await;
            }
        }
    }
}

/// Opens the placement watch again, retrying every second.
async fn reopen(shared: &Shared) -> PlacementWatch {
    loop {
        match shared.placements.watch().await {
            Ok(watch) => return watch,
            Err(err) => {
                tracing::warn!(%err, "could not watch the placement bucket; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

impl Shared {
    /// Closes `session` here unless `placement` gives it to this node.
    async fn enforce(&self, session: &str, placement: Option<&Placement>) {
        let ours = matches!(
            placement,
            Some(Placement::On { node, incarnation })
                if *node == self.name && *incarnation == self.incarnation
        );
        if !ours && lock(&self.served).contains(session) {
            tracing::info!(node = %self.name, "a session placed elsewhere is closed here");
            self.close(session).await;
        }
    }

    /// Checks every session held against the bucket.
    async fn reconcile(&self) {
        let held: Vec<String> = lock(&self.served).iter().cloned().collect();
        for session in held {
            match self.placements.read(&session_key(&session)).await {
                Ok(read) => self.enforce(&session, read.as_ref().map(|(p, _)| p)).await,
                Err(err) => tracing::warn!(%err, "could not check a session's placement"),
            }
        }
    }
}
