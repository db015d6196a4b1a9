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
    /// What a lazy feed starts its Sink with (taken then).
    start: Mutex<Option<(SinkArgs, ActorCell)>>,
    permits: Arc<Semaphore>,
    /// Whether any chunk was sent (by any clone).
    pushed: AtomicBool,
    /// Whether the stream ended before any Sink was started.
    closed: AtomicBool,
}

impl SinkFeed {
    /// A feed for a started `sink`.
    pub fn new(sink: ActorRef<SinkMsg>) -> Self {
        Self::with(OnceCell::new_with(Some(Some(sink))), None)
    }

    /// Starts a Sink under `supervisor` now and feeds it.
    pub async fn spawn(
        args: SinkArgs,
        supervisor: ActorCell,
    ) -> std::result::Result<Self, SpawnErr> {
        let (sink, _) = Actor::spawn_linked(None, Sink, args, supervisor).await?;
        Ok(Self::new(sink))
    }

    /// A feed whose Sink is started under `supervisor` with the first chunk.
    /// Not for a run whose silence is watched
    /// ([`crate::OutputWatch::watches_silence`]): that clock runs from the
    /// start.
    pub fn lazy(args: SinkArgs, supervisor: ActorCell) -> Self {
        Self::with(OnceCell::new(), Some((args, supervisor)))
    }

    fn with(
        sink: OnceCell<Option<ActorRef<SinkMsg>>>,
        start: Option<(SinkArgs, ActorCell)>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                sink,
                start: Mutex::new(start),
                permits: Arc::new(Semaphore::new(MAX_CHUNKS_IN_FLIGHT)),
                pushed: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The Sink, started now if it was not.
    async fn started(&self) -> Option<&ActorRef<SinkMsg>> {
        self.shared
            .sink
            .get_or_init(|| async {
                let start = self
                    .shared
                    .start
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                let (args, supervisor) = start?;
                match Actor::spawn_linked(None, Sink, args, supervisor).await {
                    Ok((sink, _)) => Some(sink),
                    Err(err) => {
                        tracing::debug!(%err, "the output sink could not be started");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// The Sink if it was started.
    fn current(&self) -> Option<&ActorRef<SinkMsg>> {
        self.shared.sink.get().and_then(Option::as_ref)
    }

    /// Sends a chunk once there is room. Returns `false` when the Sink is gone
    /// (the caller should keep draining its source and discard).
    pub async fn push(&self, chunk: Bytes) -> bool {
        // Set first: output that could not be stored is a lost rendering
        // at completion, never an empty one.
        self.shared.pushed.store(true, Ordering::Release);
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

    /// Tells the Sink that the stream has ended.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        if let Some(sink) = self.current() {
            let _ = sink.cast(SinkMsg::Closed);
        }
    }
}

fn stopped() -> Error {
    Error::OutputUnavailable {
        reason: "the output buffer of this job stopped".to_owned(),
    }
}
