//! Messages of the Sink actor.

use bytes::Bytes;
use ractor::RpcReplyPort;
use shellvisor_output::RenderedOutput;
use shellvisor_protocol::OutputChunk;
use shellvisor_protocol::Result;
use shellvisor_protocol::Truncation;
use tokio::sync::OwnedSemaphorePermit;

/// Messages accepted by [`crate::Sink`].
#[derive(Debug)]
pub enum SinkMsg {
    /// Fault injection for tests (feature `chaos`): the handler panics, as
    /// a bug would.
    #[cfg(feature = "chaos")]
    Panic,
    /// Raw output bytes. The permit is released once they are stored, which
    /// is what bounds the bytes in flight.
    Chunk(Bytes, OwnedSemaphorePermit),
    /// The run's foreground output ends here: render it.
    Complete(RpcReplyPort<OutputSummary>),
    /// Render the output so far (a preview; the run goes on).
    Snapshot(RpcReplyPort<OutputSummary>),
    /// Bytes received so far.
    GetTotal(RpcReplyPort<u64>),
    /// Every writer of the output has closed it; nothing more will arrive.
    Closed,
    /// Read raw bytes `[offset, offset + max)`.
    Read {
        /// First byte.
        offset: u64,
        /// Most bytes to return.
        max: usize,
        /// Where the bytes go.
        reply: RpcReplyPort<Result<OutputChunk>>,
    },
    /// Internal: the streaming throttle elapsed.
    Flush,
    /// Internal: time to check whether the run has been silent for its
    /// idle timeout.
    IdleCheck,
}

/// A run's output as rendered at its completion.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputSummary {
    /// The rendered text and what it shows.
    pub rendered: RenderedOutput,
    /// Sizes, artifact and spill error, for the result.
    pub truncation: Truncation,
    /// The minimizer's part, when `rendered` shows its text (the raw bytes
    /// are in the artifact).
    pub minimized: Option<MinimizedNote>,
}

/// What the minimizer left out of a run's text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MinimizedNote {
    /// The filter's name.
    pub filter: String,
    /// Lines of the output before filtering.
    pub input_lines: usize,
    /// Lines left out.
    pub removed_lines: usize,
}

impl OutputSummary {
    /// The summary of a run that printed nothing (what a Sink that received
    /// no byte answers to `Complete`, whatever its configuration).
    pub fn empty() -> Self {
        let rendered = shellvisor_output::render_output(&[], &[], 0, 0, usize::MAX, usize::MAX);
        let truncation = Truncation {
            truncated: rendered.truncated(),
            shown_bytes: rendered.shown_bytes,
            shown_lines: rendered.shown_lines,
            tail_offset: rendered.tail_offset,
            ..Truncation::default()
        };
        Self {
            rendered,
            truncation,
            minimized: None,
        }
    }
}
