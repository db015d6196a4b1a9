//! The producer side of a Sink.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use ractor::ActorRef;
use ractor::rpc::CallResult;
use tokio::sync::Semaphore;

use crate::messages::OutputSummary;
use crate::messages::SinkMsg;

/// Chunks in flight per Sink: with 64 KiB reads, at most 256 KiB is queued.
const MAX_CHUNKS_IN_FLIGHT: usize = 4;

/// Sends output to a Sink with backpressure: [`SinkFeed::push`] waits while
/// too many chunks are queued. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SinkFeed {
    sink: ActorRef<SinkMsg>,
    permits: Arc<Semaphore>,
    /// Whether any chunk was sent (by any clone).
    pushed: Arc<AtomicBool>,
}

impl SinkFeed {
    /// A feed for `sink`.
    pub fn new(sink: ActorRef<SinkMsg>) -> Self {
        Self {
            sink,
            permits: Arc::new(Semaphore::new(MAX_CHUNKS_IN_FLIGHT)),
            pushed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Sends a chunk once there is room. Returns `false` when the Sink is gone
    /// (the caller should keep draining its source and discard).
    pub async fn push(&self, chunk: Bytes) -> bool {
        let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await else {
            return false;
        };
        self.pushed.store(true, Ordering::Release);
        self.sink.cast(SinkMsg::Chunk(chunk, permit)).is_ok()
    }

    /// Marks the end of the run's foreground output and returns its rendering,
    /// or `None` if the Sink is gone or does not answer within `deadline`.
    /// A run that printed nothing is answered here, without asking the Sink
    /// (which would answer [`OutputSummary::empty`]): most commands an agent
    /// runs print nothing, and this saves them a round trip to another task.
    pub async fn complete(&self, deadline: Duration) -> Option<OutputSummary> {
        if !self.pushed.load(Ordering::Acquire) {
            return Some(OutputSummary::empty());
        }
        match self.sink.call(SinkMsg::Complete, Some(deadline)).await {
            Ok(CallResult::Success(summary)) => Some(summary),
            _ => None,
        }
    }

    /// Tells the Sink that the stream has ended.
    pub fn close(&self) {
        let _ = self.sink.cast(SinkMsg::Closed);
    }
}
