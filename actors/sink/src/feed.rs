//! The producer side of a Sink, and the one owner of whether it exists.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use ractor::Actor;
use ractor::ActorCell;
use ractor::ActorRef;
use ractor::SpawnErr;
use ractor::rpc::CallResult;
use shellvisor_protocol::Error;
use shellvisor_protocol::OutputChunk;
use shellvisor_protocol::Result;
use tokio::sync::OnceCell;
use tokio::sync::Semaphore;

use crate::actor::Sink;
use crate::actor::SinkArgs;
use crate::messages::OutputSummary;
use crate::messages::SinkMsg;

/// Chunks in flight per Sink: with 64 KiB reads, at most 256 KiB is queued.
const MAX_CHUNKS_IN_FLIGHT: usize = 4;

/// Sends output to a Sink with backpressure: [`SinkFeed::push`] waits while
/// too many chunks are queued. Cheap to clone.
///
/// A feed made with [`SinkFeed::lazy`] starts its Sink with the first chunk:
/// most commands an agent runs print nothing, and a Sink that never gets a
/// byte would cost them a task, its start and stop, and a wake-up at the end
/// of the run. Until then the feed answers for it, as a Sink that received
/// no byte would.
#[derive(Clone, Debug)]
pub struct SinkFeed {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The Sink once started; `None` inside when it could not be.
    sink: OnceCell<Option<ActorRef<SinkMsg>>>,
    /// What a lazy feed starts its Sink with (taken then, or by a stop).
    start: Mutex<Option<SinkArgs>>,
    /// The Sink's supervisor (the one it is started under, or linked to
    /// since): `None` for a feed made of a Sink started elsewhere.
    parent: Mutex<Option<ActorCell>>,
    permits: Arc<Semaphore>,
    /// Whether any chunk was sent (by any clone).
    pushed: AtomicBool,
    /// Whether the stream ended before any Sink was started.
    closed: AtomicBool,
    /// Whether [`SinkFeed::adopt`] moved the Sink (a start under the old
    /// supervisor then follows it).
    adopted: AtomicBool,
    /// Whether the run's output was completed (rendered for its result).
    completed: AtomicBool,
    /// Whether bytes came after that (from a run's `&` children).
    late: AtomicBool,
}

impl SinkFeed {
    /// A feed for a started `sink`.
    pub fn new(sink: ActorRef<SinkMsg>) -> Self {
        Self::with(OnceCell::new_with(Some(Some(sink))), None, None)
    }

    /// Starts a Sink under `supervisor` now and feeds it.
    pub async fn spawn(
        args: SinkArgs,
        supervisor: ActorCell,
    ) -> std::result::Result<Self, SpawnErr> {
        let (sink, _) = Actor::spawn_linked(None, Sink, args, supervisor.clone()).await?;
        Ok(Self::with(
            OnceCell::new_with(Some(Some(sink))),
            None,
            Some(supervisor),
        ))
    }

    /// A feed whose Sink is started under `supervisor` with the first chunk.
    /// Not for a run whose silence is watched
    /// ([`crate::OutputWatch::watches_silence`]): that clock runs from the
    /// start.
    pub fn lazy(args: SinkArgs, supervisor: ActorCell) -> Self {
        Self::with(OnceCell::new(), Some(args), Some(supervisor))
    }

    fn with(
        sink: OnceCell<Option<ActorRef<SinkMsg>>>,
        start: Option<SinkArgs>,
        parent: Option<ActorCell>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                sink,
                start: Mutex::new(start),
                parent: Mutex::new(parent),
                permits: Arc::new(Semaphore::new(MAX_CHUNKS_IN_FLIGHT)),
                pushed: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                adopted: AtomicBool::new(false),
                completed: AtomicBool::new(false),
                late: AtomicBool::new(false),
            }),
        }
    }

    /// The Sink, started now if it was not.
    async fn started(&self) -> Option<&ActorRef<SinkMsg>> {
        let sink = self
            .shared
            .sink
            .get_or_init(|| async {
                let args = lock(&self.shared.start).take()?;
                let supervisor = lock(&self.shared.parent).clone()?;
                match Actor::spawn_linked(None, Sink, args, supervisor).await {
                    Ok((sink, _)) => Some(sink),
                    Err(err) => {
                        tracing::debug!(%err, "the output sink could not be started");
                        None
                    }
                }
            })
            .await
            .as_ref()?;
        // Adopted while it started: it moves to its new supervisor.
        if self.shared.adopted.load(Ordering::Acquire) {
            self.follow_parent(sink);
        }
        Some(sink)
    }

    /// Moves the Sink, started or not, under `supervisor`: a finished run's
    /// output outlives the actor that ran it when that actor goes on to
    /// serve the session's next run. A Sink started elsewhere (a feed made
    /// with [`SinkFeed::new`]) stays where it is.
    pub fn adopt(&self, supervisor: ActorCell) {
        {
            let mut parent = lock(&self.shared.parent);
            if parent.is_none() {
                return;
            }
            *parent = Some(supervisor);
            self.shared.adopted.store(true, Ordering::Release);
        }
        if let Some(sink) = self.current() {
            self.follow_parent(sink);
        }
    }

    /// Links `sink` to the feed's supervisor if it is under another.
    fn follow_parent(&self, sink: &ActorRef<SinkMsg>) {
        let parent = lock(&self.shared.parent);
        let Some(parent) = parent.as_ref() else {
            return;
        };
        let cell = sink.get_cell();
        let current = cell.try_get_supervisor();
        if current.as_ref().map(ActorCell::get_id) == Some(parent.get_id()) {
            return;
        }
        if let Some(old) = current {
            cell.unlink(old);
        }
        cell.link(parent.clone());
    }

    /// Stops the Sink, and keeps a lazy feed from ever starting one: the
    /// run's output is let go (its reads fail as a stopped Sink's do).
    pub fn stop(&self, reason: &str) {
        lock(&self.shared.start).take();
        if let Some(sink) = self.current() {
            sink.stop(Some(reason.to_owned()));
        }
    }

    fn current(&self) -> Option<&ActorRef<SinkMsg>> {
        self.shared.sink.get().and_then(Option::as_ref)
    }

    /// Sends a chunk once there is room. Returns `false` when the Sink is gone
    /// (the caller should keep draining its source and discard).
    pub async fn push(&self, chunk: Bytes) -> bool {
        // Set first: output that could not be stored is a lost rendering
        // at completion, never an empty one.
        self.shared.pushed.store(true, Ordering::Release);
        if self.shared.completed.load(Ordering::Acquire) {
            self.shared.late.store(true, Ordering::Release);
        }
        let Some(sink) = self.started().await else {
            return false;
        };
        let Ok(permit) = Arc::clone(&self.shared.permits).acquire_owned().await else {
            return false;
        };
        sink.cast(SinkMsg::Chunk(chunk, permit)).is_ok()
    }

    /// Marks the end of the run's foreground output and returns its rendering,
    /// or `None` if the Sink is gone or does not answer within `deadline`.
    /// A run that printed nothing is answered here, without asking the Sink
    /// (which would answer [`OutputSummary::empty`]): this saves most runs a
    /// round trip to another task.
    pub async fn complete(&self, deadline: Duration) -> Option<OutputSummary> {
        self.shared.completed.store(true, Ordering::Release);
        if !self.shared.pushed.load(Ordering::Acquire) {
            return Some(OutputSummary::empty());
        }
        self.ask(SinkMsg::Complete, deadline).await
    }

    /// The output so far, rendered (a preview while the run goes on), or
    /// `None` if the Sink is gone or does not answer within `deadline`.
    pub async fn snapshot(&self, deadline: Duration) -> Option<OutputSummary> {
        if self.current().is_none() {
            return Some(OutputSummary::empty());
        }
        self.ask(SinkMsg::Snapshot, deadline).await
    }

    /// Bytes received so far, or `None` if the Sink is gone or does not
    /// answer within `deadline`.
    pub async fn total_bytes(&self, deadline: Duration) -> Option<u64> {
        if self.current().is_none() {
            return Some(0);
        }
        self.ask(SinkMsg::GetTotal, deadline).await
    }

    async fn ask<T: Send + 'static>(
        &self,
        message: impl FnOnce(ractor::RpcReplyPort<T>) -> SinkMsg,
        deadline: Duration,
    ) -> Option<T> {
        let sink = self.current()?;
        match sink.call(message, Some(deadline)).await {
            Ok(CallResult::Success(answer)) => Some(answer),
            _ => None,
        }
    }

    /// Reads raw bytes `[offset, offset + max)` and sends them to `reply`
    /// without waiting for the Sink's answer.
    pub fn read(&self, offset: u64, max: usize, reply: ractor::RpcReplyPort<Result<OutputChunk>>) {
        match self.shared.sink.get() {
            None => {
                // No byte arrived: every offset reads as the end.
                let _ = reply.send(Ok(OutputChunk {
                    offset,
                    data: Bytes::new(),
                    total_bytes: 0,
                    closed: self.shared.closed.load(Ordering::Acquire),
                }));
            }
            Some(sink) => {
                let sent = match sink {
                    Some(sink) => sink.cast(SinkMsg::Read { offset, max, reply }),
                    None => {
                        let _ = reply.send(Err(stopped()));
                        return;
                    }
                };
                if let Err(ractor::MessagingErr::SendErr(SinkMsg::Read { reply, .. })) = sent {
                    let _ = reply.send(Err(stopped()));
                }
            }
        }
    }

    /// Whether bytes arrived after the output was completed: the run's
    /// result counts fewer bytes than the Sink holds ([`SinkFeed::total_bytes`]
    /// has them all).
    pub fn late_output(&self) -> bool {
        self.shared.late.load(Ordering::Acquire)
    }

    /// Tells the Sink that the stream has ended.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        if let Some(sink) = self.current() {
            let _ = sink.cast(SinkMsg::Closed);
        }
    }
}

/// The lock, whether or not a holder panicked (what it guards stays valid:
/// each holder only takes or replaces the value).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn stopped() -> Error {
    Error::OutputUnavailable {
        reason: "the output buffer of this job stopped".to_owned(),
    }
}
