//! A shell's I/O task: its status channel and the current run's output.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_process::EnvRecord;
use shellvisor_process::OutputFifo;
use shellvisor_process::ShellRecord;
use shellvisor_process::StatusReader;
use shellvisor_process::StatusRecord;
use shellvisor_process::StdinProbe;
use shellvisor_process::WatchedFifo;
use shellvisor_process::read_now;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::sync::watch;

use crate::completion::Completed;
use crate::completion::Completions;
use crate::messages::ShellMsg;
use crate::shell_output::ShellOutput;
use crate::source_names::SourceNames;
use shellvisor_run::RunEnd;
use shellvisor_run::RunNotice;
use shellvisor_run::RunReport;

/// Bytes read from a FIFO at a time.
const CHUNK_BYTES: usize = 64 * 1024;
/// Read size when draining a finished run's pipe.
const DRAIN_READ_BYTES: usize = 8 * 1024;
/// How long the Sink may take to render a completed run.
const COMPLETE_DEADLINE: Duration = Duration::from_secs(5);
/// How long a run's output FIFO is left unwatched: most runs report before,
/// and their output is read once, when they do, without registering the
/// FIFO with tokio. A run that goes on is watched from then on (its output
/// streams, and a command that fills the pipe waits at most this long).
const WATCH_AFTER: Duration = Duration::from_millis(1);
/// How often a run in progress checks that its shell is not waiting for
/// its next line (see [`StdinProbe`]).
const PROBE_EVERY: Duration = Duration::from_millis(500);
/// Consecutive sightings of a waiting shell that end the run: a record
/// written just before bash went back to reading is read in between.
const PROBE_SIGHTINGS: u8 = 2;
/// Why a run ends when its shell waits for input without having reported.
const WRAPPER_STOPPED: &str = "the shell stopped running the runtime's wrapper: the command disabled or redefined something it needs (`enable -n`, a function named `builtin`, `set -n`)";

/// The shell's channels the I/O task reads besides the runs' FIFOs.
#[derive(Debug)]
pub(crate) struct ShellChannels {
    /// Status and environment records (fd 62).
    pub(crate) status: StatusReader,
    /// bash's own stdout and stderr.
    pub(crate) output: ShellOutput,
    /// Sees the shell wait for input during a run (`None`: not available).
    pub(crate) probe: Option<StdinProbe>,
    /// The names of the shell's script files in error messages.
    pub(crate) names: SourceNames,
}

/// What the Shell actor tells its I/O task.
#[derive(Debug)]
pub(crate) enum IoCommand {
    /// A run starts (sent before its line is written to the shell).
    Start(RunIo),
    /// The runtime kills the current run: from now on its status record
    /// does not complete it (a trap may let the wrapper write one); it ends
    /// when the shell does. Answered `true` when a run was in progress,
    /// `false` when it had completed already (then nothing is killed).
    Kill(oneshot::Sender<bool>),
    /// The current run ends this way (the shell died or was killed).
    End(RunEnd),
}

/// One run's I/O.
#[derive(Debug)]
pub(crate) struct RunIo {
    /// The Shell's number of the run, named in its [`Completed`].
    pub(crate) run: u64,
    pub(crate) nonce: String,
    pub(crate) fifo: OutputFifo,
    pub(crate) sink: SinkFeed,
    pub(crate) reply_to: DerivedActorRef<RunNotice>,
    pub(crate) env_follows: bool,
}

/// A run's output FIFO as the I/O task holds it.
enum RunPipe {
    /// Not watched yet: read once the run has reported.
    Quiet(OutputFifo),
    /// Registered with tokio and read as output arrives.
    Watched(WatchedFifo),
}

impl RunPipe {
    /// Reads what is in the pipe now (`shellvisor_process::read_now`).
    fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Quiet(fifo) => fifo.read_now(buf),
            Self::Watched(watched) => read_now(&watched.receiver, buf),
        }
    }

    /// A finished run's FIFO that read end-of-file, for the next run: out
    /// of tokio if it was watched (`None` if that fails: it is closed).
    fn into_quiet(self) -> Option<OutputFifo> {
        match self {
            Self::Quiet(fifo) => Some(fifo),
            Self::Watched(watched) => watched.into_quiet().ok(),
        }
    }

    /// The read end registered with tokio, for writers that outlive their
    /// run (no keep-alive: its end-of-file is the last of them closing).
    fn into_receiver(self) -> io::Result<tokio::net::unix::pipe::Receiver> {
        match self {
            Self::Quiet(fifo) => fifo.into_receiver(),
            Self::Watched(watched) => Ok(watched.receiver),
        }
    }
}

struct ActiveRun {
    run: u64,
    nonce: String,
    env_follows: bool,
    pipe: RunPipe,
    sink: SinkFeed,
    reply_to: DerivedActorRef<RunNotice>,
    buf: BytesMut,
    readable: bool,
    /// The runtime is killing it: its status record no longer completes it.
    killed: bool,
    names: SourceNames,
}

/// Runs until the Shell actor is gone and no run is left: reads status and
/// environment records, moves the current run's output into its Sink, and
/// reports each run's end to its Job. Deliberately not aborted with the actor,
/// so a run in progress always gets its report.
pub(crate) async fn io_task(
    channels: ShellChannels,
    mut commands: mpsc::UnboundedReceiver<IoCommand>,
    shell: ActorRef<ShellMsg>,
    completions: Completions,
    env: watch::Sender<EnvRecord>,
) {
    let ShellChannels {
        mut status,
        output: mut shell_output,
        probe,
        names,
    } = channels;
    let mut run: Option<ActiveRun> = None;
    // One timer for the probe, kept armed from run to run: a timer made
    // and dropped per run made tokio wake the thread parked on its driver
    // for each run (to move its next wake earlier). It fires every
    // `PROBE_EVERY` while runs go on and is left unarmed once none does.
    let probe_timer = tokio::time::sleep(PROBE_EVERY);
    tokio::pin!(probe_timer);
    let mut probe_armed = false;
    // One timer for watching the current run's FIFO, likewise: moved later
    // for each run (tokio then only extends the armed entry) and fired at
    // most once per `WATCH_AFTER` of runs.
    let watch_timer = tokio::time::sleep(WATCH_AFTER);
    tokio::pin!(watch_timer);
    let mut watch_armed = false;
    let mut sightings = 0u8;
    // A status record read before its run's `Start` (see below).
    let mut early: Option<StatusRecord> = None;
    let mut status_open = true;
    loop {
        tokio::select! {
            biased;
            command = commands.recv() => match command {
                Some(IoCommand::Start(io)) => {
                    if let Some(previous) = run.take() {
                        finish(previous, RunEnd::ShellLost { reason: "a new run replaced it".to_owned() }, None, None).await;
                    }
                    let current = ActiveRun {
                        run: io.run,
                        nonce: io.nonce,
                        env_follows: io.env_follows,
                        pipe: RunPipe::Quiet(io.fifo),
                        sink: io.sink,
                        reply_to: io.reply_to,
                        // Allocated by the first read: most runs print little.
                        buf: BytesMut::new(),
                        readable: true,
                        killed: false,
                        names: names.clone(),
                    };
                    // Sightings count for one run; two are at least
                    // `PROBE_EVERY` apart, whenever the first comes.
                    sightings = 0;
                    let now = tokio::time::Instant::now();
                    if probe.is_some() && !probe_armed {
                        probe_timer.as_mut().reset(now + PROBE_EVERY);
                        probe_armed = true;
                    }
                    watch_timer.as_mut().reset(now + WATCH_AFTER);
                    watch_armed = true;
                    // The run may be over already: its record came first.
                    // Nonces are random per run, so a record kept for another
                    // nonce was forged: the channel cannot be trusted.
                    match early.take() {
                        Some(status) if status.nonce == current.nonce => {
                            let env_follows = current.env_follows;
                            shell_output.forget();
                            finish(current, RunEnd::Completed { status, env_follows }, Some(&completions), None).await;
                        }
                        Some(_) => {
                            broken(&shell, Some(current), FOREIGN_RECORD).await;
                        }
                        None => run = Some(current),
                    }
                }
                Some(IoCommand::Kill(ack)) => {
                    let active = match run.as_mut() {
                        Some(current) => {
                            current.killed = true;
                            true
                        }
                        None => false,
                    };
                    let _ = ack.send(active);
                }
                Some(IoCommand::End(end)) => {
                    if let Some(current) = run.take() {
                        // The shell exited: what it wrote on its way out
                        // (an EXIT trap) is this run's.
                        let epilogue = matches!(end, RunEnd::ShellExited { .. }).then(|| shell_output.take());
                        finish(current, end, None, epilogue).await;
                    }
                }
                None => {
                    if let Some(current) = run.take() {
                        let end = RunEnd::ShellLost { reason: "the shell stopped before reporting the run".to_owned() };
                        finish(current, end, None, None).await;
                    }
                    return;
                }
            },
            record = status.next(), if status_open => match record {
                Ok(Some(ShellRecord::Status(record))) => {
                    tracing::trace!(target: "shellvisor::stage", "shell: status record read");
                    if run.as_ref().is_some_and(|r| r.nonce == record.nonce && r.killed) {
                        // A trap let the wrapper finish, but the runtime is
                        // killing this run: it ends when the shell does.
                        tracing::debug!("status record of a run being killed; ignored");
                    } else if run.as_ref().is_some_and(|r| r.nonce == record.nonce) {
                        // `finish` leaves the completion for the Shell
                        // before anyone can learn the run ended.
                        if let Some(current) = run.take() {
                            let env_follows = current.env_follows;
                            shell_output.forget();
                            finish(current, RunEnd::Completed { status: record, env_follows }, Some(&completions), None).await;
                        }
                    } else if run.is_some() || early.is_some() {
                        // A record for no run the shell is running: written
                        // into the runtime's descriptors on purpose.
                        broken(&shell, run.take(), FOREIGN_RECORD).await;
                    } else {
                        // The Shell sends `Start` before it writes the run's
                        // line, yet the record can be read first: tokio's
                        // channel may show a sent message only a little later
                        // (tokio-rs/tokio#3350), while the pipe is already
                        // readable. Seen about once in 25,000 runs in debug
                        // builds, as a run that never answered. Keep the
                        // record for the `Start` with its nonce.
                        tracing::debug!(nonce = %record.nonce, "status record before its run's start; kept");
                        early = Some(record);
                    }
                }
                Ok(Some(ShellRecord::Env(record))) => {
                    env.send_replace(record);
                }
                Ok(None) => {
                    // Every writer closed it: the shell exited (its exit is
                    // reported by its watcher), or exec'd another program.
                    status_open = false;
                    let _ = shell.cast(ShellMsg::StatusClosed);
                }
                Err(err) => {
                    status_open = false;
                    let reason = format!("the shell's status channel is corrupt ({err})");
                    broken(&shell, run.take(), &reason).await;
                }
            },
            ready = readable(run.as_ref()) => {
                let Some(current) = run.as_mut() else { continue };
                if ready.is_err() {
                    current.readable = false;
                    continue;
                }
                let RunPipe::Watched(watched) = &current.pipe else { continue };
                current.buf.reserve(CHUNK_BYTES);
                match watched.receiver.try_read_buf(&mut current.buf) {
                    Ok(_) => forward(&current.sink, &mut current.names, &mut current.buf).await,
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(err) => {
                        tracing::warn!(%err, "reading run output failed");
                        current.readable = false;
                    }
                }
            }
            () = shell_output.readable() => shell_output.read_ready(),
            () = &mut watch_timer, if watch_armed => {
                watch_armed = false;
                run = run.map(ActiveRun::watched);
            }
            () = &mut probe_timer, if probe_armed => {
                probe_armed = false;
                if run.as_ref().is_none_or(|r| r.killed) {
                    continue;
                }
                probe_timer.as_mut().reset(tokio::time::Instant::now() + PROBE_EVERY);
                probe_armed = true;
                if probe.as_ref().is_some_and(StdinProbe::awaits_input) {
                    sightings += 1;
                } else {
                    sightings = 0;
                }
                if sightings >= PROBE_SIGHTINGS {
                    sightings = 0;
                    broken(&shell, run.take(), WRAPPER_STOPPED).await;
                }
            }
        }
    }
}

/// Why a shell is given up when a record names no run it is running.
const FOREIGN_RECORD: &str = "the shell's status channel carried a record of no run in progress (something wrote into the runtime's descriptors)";

/// The status channel cannot be trusted: the current run (if any) ends at
/// once with `reason`, and the Shell replaces the shell.
async fn broken(shell: &ActorRef<ShellMsg>, current: Option<ActiveRun>, reason: &str) {
    tracing::warn!(reason, "shell channel failed; the shell is replaced");
    let _ = shell.cast(ShellMsg::ChannelBroken);
    if let Some(current) = current {
        let end = RunEnd::ShellLost {
            reason: format!("{reason}; the shell is replaced"),
        };
        finish(current, end, None, None).await;
    }
}

impl ActiveRun {
    /// The run goes on: its FIFO is watched from now on. Should that fail,
    /// it stays quiet, and is read when the run reports (a command that
    /// fills the pipe waits until then).
    fn watched(mut self) -> Self {
        self.pipe = match self.pipe {
            RunPipe::Quiet(fifo) => match fifo.watch() {
                Ok(watched) => RunPipe::Watched(watched),
                Err((fifo, err)) => {
                    tracing::warn!(%err, "could not watch a run's output; it is read when the run ends");
                    RunPipe::Quiet(fifo)
                }
            },
            watched @ RunPipe::Watched(_) => watched,
        };
        self
    }
}

/// Resolves when the current run's FIFO is readable; never without a
/// watched FIFO.
async fn readable(run: Option<&ActiveRun>) -> io::Result<()> {
    match run {
        Some(ActiveRun {
            pipe: RunPipe::Watched(watched),
            readable: true,
            ..
        }) => watched.receiver.readable().await,
        _ => std::future::pending().await,
    }
}

/// Ends a run: reads what the foreground wrote (it is all in the pipe by now:
/// the shell reported after its writes returned, or is dead), renders it,
/// reports to the Job, and leaves any late output of `&` children to a
/// drainer so they never get SIGPIPE. When the shell goes on (`completions`),
/// the run's completion is left for it before the Job hears of the end, with
/// the FIFO's read end when it reached end-of-file, for the next run to reuse.
/// `epilogue` is what bash wrote outside the run's redirections as it
/// exited; it follows the run's own output.
async fn finish(
    run: ActiveRun,
    end: RunEnd,
    completions: Option<&Completions>,
    epilogue: Option<Bytes>,
) {
    tracing::trace!(target: "shellvisor::stage", "pump: run ended");
    let ActiveRun {
        run: number,
        pipe,
        sink,
        reply_to,
        buf,
        readable,
        mut names,
        ..
    } = run;
    // The run reported or ended: a watched FIFO's keep-alive goes, so a
    // read of 0 bytes from now on proves every writer is gone.
    let mut pipe = pipe;
    if let RunPipe::Watched(watched) = &mut pipe {
        watched.run_reported();
    }
    // What is left is at most a pipe's capacity; read it in small pieces
    // rather than allocating a chunk-sized buffer for every run.
    let mut scratch = [0u8; DRAIN_READ_BYTES];
    let mut eof = !readable;
    // Only a read of 0 bytes proves every writer is gone (an error does not).
    let mut writers_gone = false;
    while !eof {
        match pipe.read_now(&mut scratch) {
            Ok(0) => {
                eof = true;
                writers_gone = true;
            }
            Ok(n) => {
                let chunk = names.filter(Bytes::copy_from_slice(&scratch[..n]));
                push_some(&sink, chunk).await;
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => eof = true,
        }
    }
    push_some(&sink, names.flush()).await;
    if let Some(epilogue) = epilogue {
        push_some(&sink, names.filter(epilogue)).await;
        push_some(&sink, names.flush()).await;
    }
    tracing::trace!(target: "shellvisor::stage", "pump: drained");
    let output = sink.complete(COMPLETE_DEADLINE).await;
    tracing::trace!(target: "shellvisor::stage", "pump: rendered");
    // At end-of-file with every writer gone, the FIFO goes back to the
    // Shell for the next run (out of tokio, if it was watched); after a
    // read error it is closed here. Writers still there (`&` children) are
    // read by a drainer, which watches the FIFO (it was not, for most runs).
    let (late, drained) = match (eof, writers_gone) {
        (false, _) => (Some(pipe), None),
        (true, true) => (None, pipe.into_quiet()),
        (true, false) => (None, None),
    };
    // The Job is the one task woken here (the Shell reads the completion
    // when it needs it, and the Sink's close comes first): the task woken
    // last runs next on this thread (tokio's LIFO slot), while one woken
    // before it moves to the run queue and makes tokio wake a parked worker
    // to take it (a Job pushed out by the Sink's close waited ~20 µs).
    let late = match late {
        None => {
            sink.close();
            None
        }
        Some(pipe) => Some(tokio::spawn(drain_late(pipe, sink, buf, names))),
    };
    if let Some(completions) = completions {
        completions.put(Completed {
            run: number,
            drained_fifo: drained,
        });
    }
    tracing::trace!(target: "shellvisor::stage", "pump: job told");
    let _ = reply_to.send_message(RunNotice::Finished(Box::new(RunReport {
        end,
        output,
        screen: None,
        last_full_screen: None,
    })));
    drop(late);
}

/// Keeps reading a finished run's FIFO until its last writer closes it.
async fn drain_late(pipe: RunPipe, sink: SinkFeed, mut buf: BytesMut, mut names: SourceNames) {
    let receiver = match pipe.into_receiver() {
        Ok(receiver) => receiver,
        Err(err) => {
            // Closing the read end may cost a late writer a SIGPIPE.
            tracing::warn!(%err, "could not watch a finished run's late output");
            sink.close();
            return;
        }
    };
    loop {
        if receiver.readable().await.is_err() {
            break;
        }
        buf.reserve(CHUNK_BYTES);
        match receiver.try_read_buf(&mut buf) {
            Ok(0) => break,
            Ok(_) => forward(&sink, &mut names, &mut buf).await,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    push_some(&sink, names.flush()).await;
    sink.close();
}

async fn forward(sink: &SinkFeed, names: &mut SourceNames, buf: &mut BytesMut) {
    if !buf.is_empty() {
        push_some(sink, names.filter(buf.split().freeze())).await;
    }
}

/// Pushes `chunk` unless it is empty. A gone Sink is not an error here:
/// keep draining so writers never block.
async fn push_some(sink: &SinkFeed, chunk: Bytes) {
    if !chunk.is_empty() {
        sink.push(chunk).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::time::Duration;

    use ractor::Actor;
    use ractor::ActorProcessingErr;
    use ractor::ActorRef;
    use shellvisor_actor_sink::ArtifactBudget;
    use shellvisor_actor_sink::Sink;
    use shellvisor_actor_sink::SinkArgs;
    use shellvisor_actor_sink::SinkFeed;
    use shellvisor_process::EnvRecord;
    use shellvisor_process::OutputFifo;
    use shellvisor_process::StatusReader;
    use shellvisor_protocol::JobId;
    use shellvisor_protocol::OutputConfig;
    use tokio::sync::broadcast;
    use tokio::sync::mpsc;
    use tokio::sync::watch;

    use super::IoCommand;
    use super::RunIo;
    use super::ShellChannels;
    use super::io_task;
    use crate::completion::Completions;
    use crate::messages::ShellMsg;
    use crate::shell_output::ShellOutput;
    use crate::source_names::SourceNames;
    use shellvisor_run::RunEnd;
    use shellvisor_run::RunNotice;

    /// An actor that hands every message it gets to a channel.
    struct Forward<M>(std::marker::PhantomData<fn() -> M>);

    impl<M: ractor::Message> Actor for Forward<M> {
        type Msg = M;
        type State = mpsc::UnboundedSender<M>;
        type Arguments = mpsc::UnboundedSender<M>;

        async fn pre_start(
            &self,
            _myself: ActorRef<M>,
            to: Self::Arguments,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(to)
        }

        async fn handle(
            &self,
            _myself: ActorRef<M>,
            message: M,
            to: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            let _ = to.send(message);
            Ok(())
        }
    }

    async fn forward<M: ractor::Message>() -> (ActorRef<M>, mpsc::UnboundedReceiver<M>) {
        let (to, from) = mpsc::unbounded_channel();
        let (actor, _) = Actor::spawn(None, Forward(std::marker::PhantomData), to)
            .await
            .unwrap();
        (actor, from)
    }

    /// The Shell sends a run's `Start` before writing its line, but this task
    /// can read the run's status record first (tokio's channel may show a sent
    /// message only later). The record must wait for its run, not be dropped:
    /// dropping it left the caller waiting forever.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_status_record_read_before_its_start_still_completes_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let (status_read, status_write) = rustix::pipe::pipe().unwrap();
        let mut status_write = std::fs::File::from(status_write);
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let (shell, _shell_messages) = forward::<ShellMsg>().await;
        let completions = Completions::default();
        let (job, mut job_messages) = forward::<RunNotice>().await;
        let (env, _env_rx) = watch::channel(EnvRecord::default());
        let status = StatusReader::new(status_read).unwrap();
        let (output_read, _output_write) = rustix::pipe::pipe().unwrap();
        let channels = ShellChannels {
            status,
            output: ShellOutput::new(output_read).unwrap(),
            probe: None,
            names: SourceNames::new(&[]),
        };
        tokio::spawn(io_task(
            channels,
            commands,
            shell.clone(),
            completions.clone(),
            env,
        ));

        // The record arrives and is read while no run is known.
        status_write
            .write_all(b"Snonce-1\x000\x00/tmp\x00")
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while rustix::io::ioctl_fionread(&status_write).unwrap() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "record never read");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;

        // Then the run's Start.
        let (sink, _) = Actor::spawn(
            None,
            Sink,
            SinkArgs {
                job_id: JobId::new("job-1"),
                config: OutputConfig::default(),
                artifact_path: dir.path().join("artifact"),
                budget: ArtifactBudget::runtime(u64::MAX),
                keep_artifact: false,
                events: broadcast::channel(8).0,
                watch: shellvisor_actor_sink::OutputWatch::default(),
                minimize: None,
            },
        )
        .await
        .unwrap();
        let fifo = OutputFifo::create(&dir.path().join("o")).unwrap();
        commands_tx
            .send(IoCommand::Start(RunIo {
                run: 7,
                nonce: "nonce-1".to_owned(),
                fifo,
                sink: SinkFeed::new(sink),
                reply_to: job.get_derived(),
                env_follows: false,
            }))
            .unwrap();

        let event = tokio::time::timeout(Duration::from_secs(10), job_messages.recv())
            .await
            .expect("the run never completed")
            .unwrap();
        let RunNotice::Finished(report) = event else {
            panic!("unexpected notice {event:?}");
        };
        match report.end {
            RunEnd::Completed { status, .. } => {
                assert_eq!(status.nonce, "nonce-1");
                assert_eq!(status.exit_code, Some(0));
            }
            other => panic!("unexpected end {other:?}"),
        }
        // The completion was left for the Shell before the Job heard.
        let completed = completions.take().expect("no completion for the Shell");
        assert_eq!(completed.run, 7);
        assert!(completed.drained_fifo.is_some());
    }
}
