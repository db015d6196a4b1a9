//! The PtySession actor.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::mpsc::TrySendError;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use shellvisor_actor_sink::SinkFeed;
use shellvisor_process::ChildProcess;
use shellvisor_process::ExitInfo;
use shellvisor_process::SessionGuard;
use shellvisor_process::Signal;
use shellvisor_process::pty::InputWait;
use shellvisor_process::pty::Terminal;
use shellvisor_process::pty::TerminalControl;
use shellvisor_process::pty::TerminalSpawnSpec;
use shellvisor_process::pty::TtyId;
use shellvisor_process::pty::probe_input_wait;
use shellvisor_process::pty::spawn_on_terminal;
use shellvisor_protocol::Error;
use shellvisor_protocol::JobId;
use shellvisor_protocol::PtyState;
use shellvisor_protocol::Result;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::TerminalSize;
use shellvisor_run::AbortOnDrop;
use shellvisor_run::Escalation;
use shellvisor_run::KillReason;
use shellvisor_run::RunEnd;
use shellvisor_run::RunNotice;
use shellvisor_run::RunReport;
use shellvisor_run::RuntimeContext;
use shellvisor_run::Timer;
use tokio::sync::broadcast;

use crate::io::start_reader;
use crate::io::start_writer;
use crate::keys::key_bytes;
use crate::messages::PtyCall;
use crate::messages::PtyMsg;
use crate::screen::SharedScreen;

/// How long killing the session's leftovers may rescan.
const KILL_ALL_DEADLINE: Duration = Duration::from_secs(1);
/// How long the Sink may take to render the final output.
const COMPLETE_DEADLINE: Duration = Duration::from_secs(5);
/// How long the end of a run waits for the reader to pass on the terminal's
/// last bytes (a process outside the session may keep the terminal open).
const READER_DEADLINE: Duration = Duration::from_secs(2);
/// Agreeing checks needed before a state change is reported.
const AGREEING_PROBES: u8 = 2;

/// The PtySession actor (see the crate documentation).
#[derive(Debug)]
pub struct PtySession;

/// A terminal opened for a run, and the program to start on it.
#[derive(Debug)]
pub struct PtyLaunch {
    /// The open terminal.
    pub terminal: Terminal,
    /// Its size.
    pub size: TerminalSize,
    /// The program (`bash -c <command>`) with its environment and cwd.
    pub spec: TerminalSpawnSpec,
}

/// What a PtySession needs.
#[derive(Debug)]
pub struct PtyArgs {
    /// The runtime (its spawner thread, registry and configuration).
    pub ctx: Arc<RuntimeContext>,
    /// The run's id (for events).
    pub job_id: JobId,
    /// The terminal and the program.
    pub launch: PtyLaunch,
    /// Where the raw output goes.
    pub sink: SinkFeed,
    /// The Job.
    pub reply_to: DerivedActorRef<RunNotice>,
    /// The session's event channel.
    pub events: broadcast::Sender<SessionEvent>,
}

/// A PtySession's state.
pub struct PtySessionState {
    job_id: JobId,
    control: Box<dyn TerminalControl>,
    tty: TtyId,
    screen: SharedScreen,
    input: Option<SyncSender<Vec<u8>>>,
    /// Inputs queued for the writer so far.
    input_queued: u64,
    /// Inputs the writer has written to the terminal (its own counter).
    input_written: Arc<AtomicU64>,
    session: Option<SessionGuard>,
    child: Option<ChildProcess>,
    feed: SinkFeed,
    reply_to: DerivedActorRef<RunNotice>,
    events: broadcast::Sender<SessionEvent>,
    state: PtyState,
    candidate: Option<(PtyState, u8)>,
    probing: bool,
    /// Set once the runtime kills the program's session (why, and the KILL to follow).
    killing: Option<Escalation<PtyMsg>>,
    exit: Option<ExitInfo>,
    reader_done: bool,
    /// Fires when the reader has passed on its last byte.
    reader_finished: Option<tokio::sync::oneshot::Receiver<()>>,
    finished: bool,
    kill_grace: Duration,
    drain: Duration,
    _probe_timer: AbortOnDrop<()>,
    drain_timer: Option<Timer<PtyMsg>>,
}

impl std::fmt::Debug for PtySessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtySessionState")
            .field("job_id", &self.job_id)
            .field("state", &self.state)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Actor for PtySession {
    type Msg = PtyMsg;
    type State = PtySessionState;
    type Arguments = PtyArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<PtyMsg>,
        args: PtyArgs,
    ) -> std::result::Result<PtySessionState, ActorProcessingErr> {
        let Terminal {
            control,
            reader,
            writer,
            slave,
        } = args.launch.terminal;
        let tty = TtyId::of(&slave)?;
        let registry = Arc::clone(&args.ctx.registry);
        let spec = args.launch.spec;
        let spawned = args
            .ctx
            .spawner
            .run(move || {
                let spawned = spawn_on_terminal(&spec, &slave, &registry);
                // The program holds the slave side now; without this copy the
                // terminal reports end of file once the program's side closes.
                drop(slave);
                spawned
            })
            .await
            .ok_or("the runtime's spawner has stopped")??;
        let pty_config = &args.ctx.config.pty;
        let screen = SharedScreen::new(args.launch.size);
        let (reader_done_tx, reader_finished) = tokio::sync::oneshot::channel();
        start_reader(
            reader,
            screen.clone(),
            args.sink.clone(),
            myself.clone(),
            tokio::runtime::Handle::current(),
            reader_done_tx,
        )?;
        let input_written = Arc::new(AtomicU64::new(0));
        let input = start_writer(writer, myself.clone(), Arc::clone(&input_written))?;
        let mut child = spawned.child;
        let watcher = myself.clone();
        tokio::spawn(async move {
            match child.exited().await {
                Ok(info) => {
                    let _ = watcher.cast(PtyMsg::Exited { info, child });
                }
                Err(err) => {
                    let _ = watcher.cast(PtyMsg::WatchFailed(err.to_string()));
                }
            }
        });
        let probe_timer =
            AbortOnDrop(myself.send_interval(pty_config.input_probe(), || PtyMsg::Probe));
        tracing::debug!(job = %args.job_id, session = ?spawned.session.session(), "program started on a terminal");
        Ok(PtySessionState {
            job_id: args.job_id,
            control,
            tty,
            screen,
            input: Some(input),
            input_queued: 0,
            input_written,
            session: Some(spawned.session),
            child: None,
            feed: args.sink,
            reply_to: args.reply_to,
            events: args.events,
            state: PtyState::Running,
            candidate: None,
            probing: false,
            killing: None,
            exit: None,
            reader_done: false,
            reader_finished: Some(reader_finished),
            finished: false,
            kill_grace: args.ctx.config.timeouts.kill_grace(),
            drain: pty_config.drain(),
            _probe_timer: probe_timer,
            drain_timer: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<PtyMsg>,
        message: PtyMsg,
        state: &mut PtySessionState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match message {
            #[cfg(feature = "chaos")]
            PtyMsg::Panic => panic!("chaos: a panic injected into a PtySession handler"),
            PtyMsg::Call(call) => state.call(call),
            PtyMsg::Kill(reason) => state.kill(&myself, reason),
            PtyMsg::Exited { info, child } => {
                state.exit = Some(info);
                state.child = Some(child);
                if let Some(killing) = state.killing.as_mut() {
                    killing.settle();
                }
                // As when a terminal closes: hang up whatever the program left.
                if let Some(session) = state.session.as_ref().map(SessionGuard::session) {
                    tokio::task::spawn_blocking(move || {
                        session.signal(Signal::Hup);
                        session.signal(Signal::Cont);
                    });
                }
                if state.reader_done {
                    state.finalize().await;
                } else {
                    let drain = state.drain;
                    state.drain_timer = Some(AbortOnDrop(
                        myself.send_after(drain, || PtyMsg::DrainElapsed),
                    ));
                }
            }
            PtyMsg::WatchFailed(reason) => {
                tracing::warn!(job = %state.job_id, %reason, "cannot watch the terminal program; killing it");
                state.kill(&myself, KillReason::Shutdown);
            }
            PtyMsg::ReaderDone => {
                state.reader_done = true;
                state.feed.close();
                if state.exit.is_some() {
                    state.finalize().await;
                }
            }
            PtyMsg::DrainElapsed => {
                state.drain_timer = None;
                state.finalize().await;
            }
            PtyMsg::WriterFailed(reason) => {
                tracing::debug!(job = %state.job_id, %reason, "terminal input closed");
                state.input = None;
            }
            PtyMsg::Probe => state.probe(&myself),
            PtyMsg::Probed {
                wait,
                inputs_written,
            } => {
                state.probing = false;
                // Only a check begun after all input so far was written
                // can tell that the program waits for more.
                state.probed(wait, inputs_written >= state.input_queued);
            }
            PtyMsg::Escalate => {
                if state.exit.is_none()
                    && let Some(session) = state.session.as_ref().map(SessionGuard::session)
                    && let Some(killing) = state.killing.as_mut()
                {
                    killing.grace_elapsed(&session);
                }
            }
        }
        Ok(())
    }
}

impl PtySessionState {
    fn call(&mut self, call: PtyCall) {
        match call {
            PtyCall::Write { bytes, reply } => {
                let _ = reply.send(self.send_input(bytes));
            }
            PtyCall::Key { name, reply } => {
                let sent = key_bytes(&name, self.screen.application_cursor())
                    .and_then(|bytes| self.send_input(bytes));
                let _ = reply.send(sent);
            }
            PtyCall::Resize { size, reply } => {
                let _ = reply.send(self.resize(size));
            }
            PtyCall::Screen(reply) => {
                let _ = reply.send(Ok(self.screen.render()));
            }
            PtyCall::State(reply) => {
                let _ = reply.send(Ok(self.state));
            }
        }
    }

    fn send_input(&mut self, bytes: Vec<u8>) -> Result<()> {
        if self.exit.is_some() {
            return Err(rejected("the program has exited"));
        }
        let Some(input) = &self.input else {
            return Err(rejected("the terminal's input is closed"));
        };
        match input.try_send(bytes) {
            Ok(()) => {
                // The program is about to read: its wait is over until
                // checks begun after the input reached the terminal say
                // otherwise, so nobody reads a screen from before it reacted.
                self.input_queued += 1;
                self.candidate = None;
                if self.state == PtyState::AwaitingInput {
                    self.set_state(PtyState::Running);
                }
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(rejected(
                "the terminal's input queue is full (the program is not reading); none of this input was written",
            )),
            Err(TrySendError::Disconnected(_)) => {
                self.input = None;
                Err(rejected("the terminal's input is closed"))
            }
        }
    }

    fn resize(&mut self, size: TerminalSize) -> Result<TerminalSize> {
        if self.exit.is_some() {
            return Err(rejected("the program has exited"));
        }
        let size = TerminalSize::clamped(Some(size.cols), Some(size.rows));
        self.control
            .resize(size)
            .map_err(|err| Error::io("resizing the terminal", &err))?;
        self.screen.resize(size);
        Ok(size)
    }

    fn kill(&mut self, myself: &ActorRef<PtyMsg>, reason: KillReason) {
        if self.exit.is_some() || self.killing.is_some() {
            return;
        }
        // No session only once the run is finalized, after the exit.
        let Some(session) = self.session.as_ref().map(SessionGuard::session) else {
            return;
        };
        self.killing = Some(Escalation::begin(
            reason,
            &session,
            myself,
            self.kill_grace,
            || PtyMsg::Escalate,
        ));
    }

    fn probe(&mut self, myself: &ActorRef<PtyMsg>) {
        if self.probing || self.exit.is_some() {
            return;
        }
        let Some(foreground) = self.control.foreground_group() else {
            return;
        };
        self.probing = true;
        let tty = self.tty;
        let actor = myself.clone();
        let written = Arc::clone(&self.input_written);
        tokio::task::spawn_blocking(move || {
            let inputs_written = written.load(Ordering::Acquire);
            let wait = probe_input_wait(foreground, tty);
            let _ = actor.cast(PtyMsg::Probed {
                wait,
                inputs_written,
            });
        });
    }

    fn probed(&mut self, result: InputWait, input_delivered: bool) {
        if self.exit.is_some() {
            return;
        }
        let seen = match result {
            // A wait seen before the last input reached the terminal is the
            // wait that input ends.
            InputWait::Waiting if !input_delivered => {
                self.candidate = None;
                return;
            }
            InputWait::Waiting => PtyState::AwaitingInput,
            InputWait::Busy => PtyState::Running,
            InputWait::Unknown => {
                self.candidate = None;
                return;
            }
        };
        if seen == self.state {
            self.candidate = None;
            return;
        }
        let agreeing = match self.candidate {
            Some((candidate, count)) if candidate == seen => count + 1,
            _ => 1,
        };
        if agreeing >= AGREEING_PROBES {
            self.candidate = None;
            self.set_state(seen);
        } else {
            self.candidate = Some((seen, agreeing));
        }
    }

    fn set_state(&mut self, state: PtyState) {
        self.state = state;
        tracing::debug!(job = %self.job_id, state = state.as_str(), "terminal state changed");
        let _ = self.events.send(SessionEvent::PtyState {
            job_id: self.job_id.clone(),
            state,
        });
        let _ = self.reply_to.send_message(RunNotice::PtyState(state));
    }

    /// The program has exited and its output has drained (or had its time):
    /// kill what is left of its session, reap it, and report the run.
    async fn finalize(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.input = None;
        if let Some(guard) = self.session.take() {
            let session = guard.session();
            let empty = tokio::task::spawn_blocking(move || session.kill_all(KILL_ALL_DEADLINE))
                .await
                .unwrap_or(false);
            if let Some(child) = self.child.as_mut()
                && let Err(err) = child.reap()
            {
                tracing::warn!(job = %self.job_id, %err, "could not reap the terminal program");
            }
            if empty {
                let mut guard = guard;
                guard.release();
            } else {
                tracing::warn!(job = %self.job_id, ?session, "terminal session kept members after SIGKILL");
                self.session = Some(guard);
            }
        }
        // What the program wrote before it exited is in the terminal's buffer;
        // with its session gone the reader reaches end of file once it has
        // passed all of it on. A reader slow to get the CPU (a loaded machine)
        // must not lose the program's last lines to the drain timer.
        if let Some(finished) = self.reader_finished.take() {
            let _ = tokio::time::timeout(READER_DEADLINE, finished).await;
        }
        let exit = self.exit.unwrap_or(ExitInfo {
            code: None,
            signal: None,
        });
        let output = self.feed.complete(COMPLETE_DEADLINE).await;
        let screen = self.screen.render();
        let last_full_screen = self.screen.last_full_screen();
        let killed = self.killing.as_ref().map(Escalation::reason);
        let code = match killed {
            Some(KillReason::Timeout | KillReason::Idle | KillReason::Cancelled) => None,
            _ => Some(exit.shell_status()),
        };
        self.set_state(PtyState::Exited { code });
        let _ = self
            .reply_to
            .send_message(RunNotice::Finished(Box::new(RunReport {
                end: RunEnd::ProgramExited { exit, killed },
                output,
                screen: Some(screen),
                last_full_screen,
            })));
    }
}

fn rejected(reason: &str) -> Error {
    Error::InputRejected {
        reason: reason.to_owned(),
    }
}
