//! The Sink actor.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::concurrency::JoinHandle;
use shellvisor_minimizer::Filter;
use shellvisor_output::HeadTail;
use shellvisor_output::render_output;
use shellvisor_output::sanitize;
use shellvisor_protocol::ArtifactRef;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::OutputConfig;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::Truncation;
use tokio::sync::broadcast;

use crate::artifact::Artifact;
use crate::budget::ArtifactBudget;
use crate::flood::FloodGuard;
use crate::messages::MinimizedNote;
use crate::messages::OutputSummary;
use crate::messages::SinkMsg;
use crate::watch::OutputWatch;
use crate::watch::Watching;
use shellvisor_protocol::OutputChunk;

/// Largest single read by offset.
const MAX_READ_BYTES: usize = 1024 * 1024;
/// The column cap of the text a filter reads (the rendering caps it after).
const SANITIZE_COLUMNS: usize = 1 << 20;

/// The Sink actor (see the crate documentation).
#[derive(Debug)]
pub struct Sink;

/// What a Sink needs.
#[derive(Debug)]
pub struct SinkArgs {
    /// The run whose output this is (also the artifact id).
    pub job_id: JobId,
    /// Buffer sizes, column cap and streaming throttle.
    pub config: OutputConfig,
    /// Where the artifact goes if output outgrows memory (its directory exists).
    pub artifact_path: PathBuf,
    /// The session's and the runtime's artifact bytes, charged as written.
    pub budget: ArtifactBudget,
    /// Leave the artifact file when the Sink stops (the user chose the
    /// artifacts directory to keep them); otherwise it goes with its job.
    pub keep_artifact: bool,
    /// The session's event channel, for streaming.
    pub events: broadcast::Sender<SessionEvent>,
    /// What to watch the output for on the Job's behalf (silence, a pattern).
    pub watch: OutputWatch,
    /// The minimizer's filter for this run's text (a single simple command
    /// with the minimizer on), applied when the run completes.
    pub minimize: Option<Arc<Filter>>,
}

/// A Sink's state.
#[derive(Debug)]
pub struct SinkState {
    job_id: JobId,
    config: OutputConfig,
    buffer: HeadTail,
    artifact: Artifact,
    budget: ArtifactBudget,
    keep_artifact: bool,
    events: broadcast::Sender<SessionEvent>,
    pending: BytesMut,
    pending_offset: u64,
    flush_timer: Option<JoinHandle<Result<(), ractor::MessagingErr<SinkMsg>>>>,
    closed: bool,
    /// Raw bytes of the line being written (since the last newline).
    line_bytes: usize,
    watching: Watching,
    flood: FloodGuard,
    idle_timer: Option<JoinHandle<Result<(), ractor::MessagingErr<SinkMsg>>>>,
    /// The filter to apply at completion (taken then).
    minimize: Option<Arc<Filter>>,
    /// The minimized text and what it left out, once applied.
    minimized: Option<(String, MinimizedNote)>,
}

impl Actor for Sink {
    type Msg = SinkMsg;
    type State = SinkState;
    type Arguments = SinkArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SinkMsg>,
        args: SinkArgs,
    ) -> Result<SinkState, ActorProcessingErr> {
        let watching = Watching::new(args.watch);
        let idle_timer = watching
            .idle()
            .map(|idle| myself.send_after(idle, || SinkMsg::IdleCheck));
        Ok(SinkState {
            flood: FloodGuard::new(args.config.stream_max_bytes_per_sec),
            watching,
            idle_timer,
            buffer: HeadTail::new(args.config.head_bytes, args.config.tail_bytes),
            job_id: args.job_id,
            artifact: Artifact::NotOpened(args.artifact_path),
            budget: args.budget,
            keep_artifact: args.keep_artifact,
            events: args.events,
            pending: BytesMut::new(),
            pending_offset: 0,
            flush_timer: None,
            closed: false,
            line_bytes: 0,
            config: args.config,
            minimize: args.minimize,
            minimized: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SinkMsg>,
        message: SinkMsg,
        state: &mut SinkState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            #[cfg(feature = "chaos")]
            SinkMsg::Panic => panic!("chaos: a panic injected into a Sink handler"),
            SinkMsg::Chunk(chunk, permit) => {
                state.store(&chunk);
                drop(permit);
                state.watching.saw(&chunk);
                state.stream(&myself, &chunk);
            }
            SinkMsg::IdleCheck => {
                state.idle_timer = state
                    .watching
                    .check_idle()
                    .map(|next| myself.send_after(next, || SinkMsg::IdleCheck));
            }
            SinkMsg::Complete(reply) => {
                state.stop_watching();
                state.flush();
                state.announce_gap();
                state.minimize();
                let _ = reply.send(state.summary());
            }
            SinkMsg::Snapshot(reply) => {
                let _ = reply.send(state.summary());
            }
            SinkMsg::GetTotal(reply) => {
                let _ = reply.send(state.buffer.total_bytes());
            }
            SinkMsg::Closed => {
                tracing::trace!(target: "shellvisor::stage", "sink: closed");
                state.stop_watching();
                state.flush();
                state.announce_gap();
                state.closed = true;
                // The job may be retained for minutes: keep only what is held.
                state.buffer.shrink_to_fit();
                state.pending = bytes::BytesMut::new();
            }
            SinkMsg::Read { offset, max, reply } => {
                let _ = reply.send(state.read(offset, max));
            }
            SinkMsg::Flush => {
                state.flush_timer = None;
                state.flush();
            }
        }
        Ok(())
    }
}

impl SinkState {
    fn stop_watching(&mut self) {
        self.watching.stop();
        if let Some(timer) = self.idle_timer.take() {
            timer.abort();
        }
    }

    fn store(&mut self, chunk: &[u8]) {
        // Output longer than the inline cap is shown truncated, so its full
        // bytes must be readable: open the artifact then, or before any byte
        // would leave memory.
        // A line longer than the column cap is shown cut: the same rule.
        let not_opened = matches!(self.artifact, Artifact::NotOpened(_));
        let needed = not_opened
            && (self.buffer.total_bytes() + chunk.len() as u64 > self.config.inline_bytes as u64
                || self.buffer.would_drop(chunk.len())
                || self.long_line(chunk));
        if needed && let Artifact::NotOpened(path) = &self.artifact {
            let path = path.clone();
            let tail = self.buffer.tail_vec();
            self.artifact = Artifact::open(
                path,
                &[self.buffer.head(), &tail],
                &self.budget,
                self.keep_artifact,
            );
        }
        self.artifact.append(chunk);
        self.buffer.push(chunk);
    }

    /// Whether `chunk` completes or extends a line of more raw bytes than
    /// the column cap (tracked across chunks until the artifact is open).
    fn long_line(&mut self, chunk: &[u8]) -> bool {
        let cap = self.config.max_columns;
        let mut start = 0;
        let mut long = false;
        for newline in memchr::memchr_iter(b'\n', chunk) {
            long |= self.line_bytes + (newline - start) > cap;
            self.line_bytes = 0;
            start = newline + 1;
        }
        self.line_bytes += chunk.len() - start;
        long || self.line_bytes > cap
    }

    fn stream(&mut self, myself: &ActorRef<SinkMsg>, chunk: &Bytes) {
        if self.events.receiver_count() == 0 {
            return;
        }
        if self.pending.is_empty() {
            self.pending_offset = self.buffer.total_bytes() - chunk.len() as u64;
        }
        self.pending.extend_from_slice(chunk);
        if self.pending.len() >= self.config.stream_max_event_bytes
            || self.config.stream_throttle_ms == 0
        {
            self.flush();
        } else if self.flush_timer.is_none() {
            let throttle = Duration::from_millis(self.config.stream_throttle_ms);
            self.flush_timer = Some(myself.send_after(throttle, || SinkMsg::Flush));
        }
    }

    fn flush(&mut self) {
        if let Some(timer) = self.flush_timer.take() {
            timer.abort();
        }
        let max = self.config.stream_max_event_bytes.max(1);
        while !self.pending.is_empty() {
            let take = self.pending.len().min(max);
            let data = self.pending.split_to(take).freeze();
            let offset = self.pending_offset;
            self.pending_offset += data.len() as u64;
            if !self.flood.admit(offset, data.len() as u64) {
                continue;
            }
            self.announce_gap();
            let _ = self.events.send(SessionEvent::Output {
                job_id: self.job_id.clone(),
                offset,
                data,
            });
        }
    }

    /// Tells subscribers which streamed output the flood guard left out.
    fn announce_gap(&mut self) {
        if let Some(gap) = self.flood.take_gap() {
            let _ = self.events.send(SessionEvent::OutputSuppressed {
                job_id: self.job_id.clone(),
                offset: gap.offset,
                bytes: gap.bytes,
                events: gap.events,
            });
        }
    }

    /// Applies the minimizer's filter to the whole output, when it is at
    /// most the capture cap and the filter changes something. The raw bytes
    /// must be saved for the model to read: the artifact is written now if
    /// it was not (a run whose output fits in memory), and when it cannot
    /// be, the raw text is shown instead.
    fn minimize(&mut self) {
        let Some(filter) = self.minimize.take() else {
            return;
        };
        let total = self.buffer.total_bytes();
        let cap = self.config.minimizer.max_capture_bytes as u64;
        if total == 0 || total > cap {
            return;
        }
        let len = total as usize;
        let Some(raw) = self
            .buffer
            .read(0, len)
            .filter(|held| held.len() == len)
            .or_else(|| self.artifact.read(0, len))
        else {
            return;
        };
        let text = sanitize(&raw, SANITIZE_COLUMNS);
        let shown = filter.apply(&text);
        if !shown.changed {
            return;
        }
        if let Artifact::NotOpened(path) = &self.artifact {
            let path = path.clone();
            self.artifact = Artifact::open(path, &[&raw], &self.budget, self.keep_artifact);
        }
        if !matches!(self.artifact, Artifact::Open(_)) {
            return;
        }
        self.minimized = Some((
            shown.text,
            MinimizedNote {
                filter: filter.name().to_owned(),
                input_lines: shown.input_lines,
                removed_lines: shown.removed_lines,
            },
        ));
    }

    fn summary(&self) -> OutputSummary {
        let tail = self.buffer.tail_vec();
        let rendered = match &self.minimized {
            Some((text, _)) => render_output(
                text.as_bytes(),
                &[],
                text.len() as u64,
                memchr::memchr_iter(b'\n', text.as_bytes()).count() as u64,
                self.config.max_columns,
                self.config.inline_bytes,
            ),
            None => render_output(
                self.buffer.head(),
                &tail,
                self.buffer.tail_offset(),
                self.buffer.newlines(),
                self.config.max_columns,
                self.config.inline_bytes,
            ),
        };
        let (artifact, spill_error) = match &self.artifact {
            Artifact::NotOpened(_) => (None, None),
            Artifact::Open(open) => (
                Some(ArtifactRef {
                    id: self.job_id.to_string(),
                    path: open.path.display().to_string(),
                }),
                None,
            ),
            Artifact::Failed(reason) => (None, Some(reason.clone())),
        };
        let minimized = self.minimized.as_ref().map(|(_, note)| note.clone());
        let truncation = Truncation {
            truncated: rendered.truncated() || minimized.is_some(),
            total_bytes: self.buffer.total_bytes(),
            total_lines: self.buffer.total_lines(),
            shown_bytes: rendered.shown_bytes,
            shown_lines: rendered.shown_lines,
            tail_offset: match &minimized {
                Some(_) => self.buffer.total_bytes(),
                None => rendered.tail_offset,
            },
            artifact,
            spill_error,
            minimizer: minimized.as_ref().map(|note| note.filter.clone()),
        };
        OutputSummary {
            rendered,
            truncation,
            minimized,
        }
    }

    fn read(&self, offset: u64, max: usize) -> shellvisor_protocol::Result<OutputChunk> {
        let max = max.min(MAX_READ_BYTES);
        let total = self.buffer.total_bytes();
        let data = match self.buffer.read(offset, max) {
            Some(bytes) => bytes,
            None => {
                let len = (total.saturating_sub(offset)).min(max as u64) as usize;
                self.artifact.read(offset, len).ok_or_else(|| Error::OutputUnavailable {
                    reason: match &self.artifact {
                        Artifact::Failed(reason) => {
                            format!("bytes {offset}.. were not kept in memory and the artifact failed: {reason}")
                        }
                        _ => format!("bytes {offset}.. are no longer held"),
                    },
                })?
            }
        };
        Ok(OutputChunk {
            offset,
            data: Bytes::from(data),
            total_bytes: total,
            closed: self.closed,
        })
    }
}
