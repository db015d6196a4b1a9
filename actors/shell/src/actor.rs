//! The Shell actor.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use ractor::MessagingErr;
use shellvisor_policy::ShellTraits;
use shellvisor_policy::may_change_environment;
use shellvisor_process::CommandWriter;
use shellvisor_process::EnvRecord;
use shellvisor_process::ExitInfo;
use shellvisor_process::GroupGuard;
use shellvisor_process::OutputFifo;
use shellvisor_process::PrivateDir;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::ShellFiles;
use shellvisor_process::ShellRecord;
use shellvisor_process::ShellSpawnSpec;
use shellvisor_process::Signal;
use shellvisor_process::Spawner;
use shellvisor_process::StatusReader;
use shellvisor_process::spawn_shell;
use shellvisor_protocol::random_token;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::sync::watch;

use crate::io::IoCommand;
use crate::io::RunIo;
use crate::io::io_task;
use crate::messages::ExecOutcome;
use crate::messages::ExecRequest;
use crate::messages::KillReason;
use crate::messages::RunEnd;
use crate::messages::ShellEvent;
use crate::messages::ShellMsg;
use crate::messages::ShellNotice;
use crate::tasks::AbortOnDrop;

/// Random bytes in a shell's nonce prefix (each run appends a counter).
const NONCE_BYTES: usize = 10;
/// How long a run waits for the previous run's environment record.
const ENV_RECORD_WAIT: Duration = Duration::from_secs(1);
/// How long after a scan that found bash alone a released shell looks again
/// before stopping. A scan of `/proc` is not atomic: a child that forks and
/// exits while the scan runs (a daemon's double fork) can hide its grandchild,
/// which would die with the group before it leaves it.
const ALONE_CONFIRM: Duration = Duration::from_millis(50);

/// The Shell actor (see the crate documentation).
#[derive(Debug)]
pub struct Shell;

/// What a Shell needs to start.
#[derive(Debug)]
pub struct ShellArgs {
    /// The runtime's spawner thread.
    pub spawner: Arc<Spawner>,
    /// The runtime's registry of live process groups.
    pub registry: Arc<ProcessRegistry>,
    /// Program, environment and initial directory.
    pub spawn: ShellSpawnSpec,
    /// The session's private directory; the shell makes its own inside it.
    pub parent_dir: PathBuf,
    /// How long bash may take to become ready.
    pub startup_timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Where the shell's death is reported at once.
    pub notify: Option<DerivedActorRef<ShellNotice>>,
    /// Where the exported environment after each run is published (the
    /// Session keeps a receiver for its primary shell; `None` for a shell
    /// nobody seeds from).
    pub env: Option<watch::Sender<EnvRecord>>,
}

/// A Shell's state. Field order matters: the process group guard is dropped
/// (SIGKILL to the group) before anything else, so a killed actor never
/// leaves processes behind.
#[derive(Debug)]
pub struct ShellState {
    live: Option<LiveShell>,
    start: Option<ShellArgs>,
    kill_grace: Duration,
    notify: Option<DerivedActorRef<ShellNotice>>,
}

#[derive(Debug)]
struct LiveShell {
    group: GroupGuard,
    files: ShellFiles,
    writer: CommandWriter,
    nonce_prefix: String,
    runs: u64,
    next_fifo: Option<OutputFifo>,
    io: mpsc::UnboundedSender<IoCommand>,
    env: watch::Receiver<EnvRecord>,
    /// Nonce of the last run that reports its environment, until its record is in.
    env_pending: Option<String>,
    exit: watch::Receiver<Option<ExitInfo>>,
    reap: Option<oneshot::Sender<()>>,
    busy: bool,
    /// Set once the shell is released: how often to check for the processes
    /// its commands left running.
    retain_poll: Option<Duration>,
    /// Consecutive scans that found bash alone in its group.
    alone_scans: u8,
    killing: Option<KillReason>,
    exited: Option<ExitInfo>,
    escalation: Option<AbortOnDrop<Result<(), MessagingErr<ShellMsg>>>>,
    _watch_task: AbortOnDrop<()>,
    _dir: PrivateDir,
}

impl Actor for Shell {
    type Msg = ShellMsg;
    type State = ShellState;
    type Arguments = ShellArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ShellMsg>,
        args: ShellArgs,
    ) -> Result<ShellState, ActorProcessingErr> {
        Ok(ShellState {
            live: None,
            kill_grace: args.kill_grace,
            notify: args.notify.clone(),
            start: Some(args),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<ShellMsg>,
        state: &mut ShellState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(args) = state.start.take() else {
            return Ok(());
        };
        state.live = Some(start_shell(&myself, args).await?);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ShellMsg>,
        message: ShellMsg,
        state: &mut ShellState,
    ) -> Result<(), ActorProcessingErr> {
        let ShellState {
            live,
            kill_grace: grace,
            notify,
            ..
        } = state;
        let grace = *grace;
        let Some(live) = live.as_mut() else {
            if let ShellMsg::Exec(request) = message {
                refuse(&request.reply_to, "the shell is not running");
            }
            return Ok(());
        };
        match message {
            ShellMsg::Exec(request) => live.exec(request).await,
            ShellMsg::Kill(reason) => live.kill(&myself, reason, grace),
            ShellMsg::Release { poll } => {
                live.retain_poll = Some(poll);
                live.count_children(&myself);
            }
            ShellMsg::CheckChildren => live.count_children(&myself),
            ShellMsg::ChildrenCounted(others) => live.release_if_alone(&myself, others, grace),
            ShellMsg::RunCompleted { fifo_reusable } => {
                live.busy = false;
                live.prepare_fifo(fifo_reusable);
            }
            ShellMsg::Exited(info) => {
                if let Some(notify) = notify {
                    let _ = notify.send_message(ShellNotice::Ended {
                        shell: myself.get_id(),
                        exit: info,
                        during_run: live.busy,
                    });
                }
                live.exited = Some(info);
                live.busy = false;
                live.end_run(RunEnd::ShellExited {
                    exit: info,
                    killed: live.killing,
                });
                if live.killing.is_none() {
                    live.kill(&myself, KillReason::ShellEnded, grace);
                }
            }
            ShellMsg::Escalate => {
                live.escalation = None;
                if let Err(err) = live.group.signal(Signal::Kill) {
                    tracing::warn!(%err, "could not kill shell process group");
                }
                if live.exited.is_some() {
                    live.finish();
                    myself.stop(Some("shell ended".to_owned()));
                } else {
                    // KILL was sent; the exit watcher reports shortly.
                    live.escalation =
                        Some(AbortOnDrop(myself.send_after(grace, || ShellMsg::Escalate)));
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ShellMsg>,
        state: &mut ShellState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(live) = state.live.as_mut() {
            if live.exited.is_none() {
                let _ = live.group.signal(Signal::Term);
                let _ = live.group.signal(Signal::Cont);
                let mut exit = live.exit.clone();
                let _ =
                    tokio::time::timeout(state.kill_grace, exit.wait_for(Option::is_some)).await;
            }
            live.finish();
        }
        Ok(())
    }
}

/// Spawns bash, writes its start-up script and waits until it reports ready.
async fn start_shell(
    myself: &ActorRef<ShellMsg>,
    args: ShellArgs,
) -> Result<LiveShell, ActorProcessingErr> {
    tracing::trace!(target: "shellvisor::stage", "shell: starting");
    let dir = PrivateDir::create_unique(&args.parent_dir, "sh-")?;
    let files = ShellFiles::create(dir.path())?;
    let registry = Arc::clone(&args.registry);
    let spec = args.spawn.clone();
    let spawned = args
        .spawner
        .run(move || spawn_shell(&spec, &registry))
        .await
        .ok_or("the runtime is shutting down")??;
    tracing::trace!(target: "shellvisor::stage", "shell: bash spawned");
    let group = spawned.group;
    let mut child = spawned.child;
    let mut writer = CommandWriter::new(spawned.stdin)?;
    let mut status = StatusReader::new(spawned.status)?;

    let nonce_prefix = random_token(NONCE_BYTES)?;
    let nonce = format!("{nonce_prefix}i");
    let init_line = files.write_init(&nonce)?;
    // A shell that dies at once closes its stdin; the exit below says why.
    let _ = writer.send(&init_line).await;
    let ready = tokio::time::timeout(args.startup_timeout, async {
        tokio::select! {
            record = status.next() => match record {
                Ok(Some(ShellRecord::Status(record))) if record.nonce == nonce => Ok(()),
                Ok(Some(_)) => Err("the shell reported an unexpected status record".to_owned()),
                Ok(None) | Err(_) => match child.exited().await {
                    Ok(exit) => Err(format!("the shell exited during start-up with status {}", exit.shell_status())),
                    Err(err) => Err(format!("the shell closed its status channel during start-up: {err}")),
                },
            },
            exit = child.exited() => Err(match exit {
                Ok(exit) => format!("the shell exited during start-up with status {}", exit.shell_status()),
                Err(err) => format!("could not watch the shell: {err}"),
            }),
        }
    })
    .await;
    match ready {
        Ok(Ok(())) => tracing::trace!(target: "shellvisor::stage", "shell: bash ready"),
        Ok(Err(reason)) => return Err(reason.into()),
        Err(_) => {
            return Err(format!(
                "the shell did not become ready within {} ms",
                args.startup_timeout.as_millis()
            )
            .into());
        }
    }

    let (env_tx, env_rx) = match args.env {
        Some(tx) => {
            let rx = tx.subscribe();
            (tx, rx)
        }
        None => watch::channel(EnvRecord::default()),
    };
    let (io, commands) = mpsc::unbounded_channel();
    // Not aborted with the actor: a run in progress always gets its report.
    tokio::spawn(io_task(status, commands, myself.clone(), env_tx));
    let (exit_tx, exit_rx) = watch::channel(None);
    let (reap_tx, reap_rx) = oneshot::channel::<()>();
    let watch_task = {
        let myself = myself.clone();
        tokio::spawn(async move {
            match child.exited().await {
                Ok(info) => {
                    let _ = exit_tx.send(Some(info));
                    let _ = myself.cast(ShellMsg::Exited(info));
                }
                Err(err) => tracing::warn!(%err, "could not watch the shell process"),
            }
            // Reap only once the group is dead (or the actor is gone), so the
            // pid (and the group id) cannot be reused while it is being killed.
            let _ = reap_rx.await;
            if let Err(err) = child.reap() {
                tracing::debug!(%err, "reaping the shell");
            }
        })
    };
    let mut live = LiveShell {
        group,
        files,
        writer,
        nonce_prefix,
        runs: 0,
        next_fifo: None,
        io,
        env: env_rx,
        env_pending: Some(nonce.clone()),
        exit: exit_rx,
        reap: Some(reap_tx),
        busy: false,
        retain_poll: None,
        alone_scans: 0,
        killing: None,
        exited: None,
        escalation: None,
        _watch_task: AbortOnDrop(watch_task),
        _dir: dir,
    };
    live.prepare_fifo(false);
    Ok(live)
}

impl LiveShell {
    async fn exec(&mut self, request: ExecRequest) {
        tracing::trace!(target: "shellvisor::stage", "shell: exec received");
        if self.exited.is_some() || self.killing.is_some() {
            return refuse(&request.reply_to, "the shell has ended");
        }
        if self.busy {
            return refuse(&request.reply_to, "the shell is already running a command");
        }
        self.runs += 1;
        let nonce = format!("{}{}", self.nonce_prefix, self.runs);
        let env_record = self.may_change_environment(&request.command).await;
        let written = self.files.write_run(
            &nonce,
            &request.command,
            request.cwd.as_deref(),
            &request.env,
            env_record,
        );
        if let Err(err) = written {
            return refuse(
                &request.reply_to,
                &format!("could not write the command file: {err}"),
            );
        }
        tracing::trace!(target: "shellvisor::stage", "shell: files written");
        let fifo = match self.next_fifo.take() {
            Some(fifo) => fifo,
            None => match OutputFifo::create(self.files.fifo_path()) {
                Ok(fifo) => fifo,
                Err(err) => {
                    return refuse(
                        &request.reply_to,
                        &format!("could not create the output pipe: {err}"),
                    );
                }
            },
        };
        self.env_pending = env_record.then(|| nonce.clone());
        let start = IoCommand::Start(RunIo {
            nonce,
            fifo,
            sink: request.sink,
            reply_to: request.reply_to,
            env_follows: env_record,
        });
        if let Err(mpsc::error::SendError(IoCommand::Start(io))) = self.io.send(start) {
            return refuse(&io.reply_to, "the shell's I/O stopped");
        }
        self.busy = true;
        tracing::trace!(target: "shellvisor::stage", "shell: fifo ready, pump spawned");
        if let Err(err) = self.writer.send(self.files.run_line()).await {
            // The shell is gone; its exit is reported by the watcher.
            tracing::debug!(%err, "writing to the shell failed");
        }
    }

    /// Whether `command` may change the exported environment, judged with the
    /// shell's functions, aliases and traps as of the previous run (whose
    /// environment record, if one was asked for, is awaited first: bash writes
    /// it before reading the next line anyway).
    async fn may_change_environment(&mut self, command: &str) -> bool {
        if let Some(nonce) = self.env_pending.take() {
            let arrived = tokio::time::timeout(
                ENV_RECORD_WAIT,
                self.env.wait_for(|record| record.nonce == nonce),
            )
            .await;
            if !matches!(arrived, Ok(Ok(_))) {
                // Without the latest traits, assume the worst.
                return true;
            }
        }
        let traits = {
            let record = self.env.borrow();
            ShellTraits {
                functions: record.functions.iter().cloned().collect(),
                aliases: record.aliases,
                traps: record.traps,
            }
        };
        may_change_environment(command, &traits)
    }

    /// Prepares the next run's output FIFO while the shell is idle, off the
    /// next caller's path: the last one reopened when `reusable` (its run's
    /// output reached end-of-file and every descriptor of it is closed), a
    /// new one otherwise (a `&` child still writes to the last one). A
    /// failure is retried when the run starts.
    fn prepare_fifo(&mut self, reusable: bool) {
        if self.next_fifo.is_some() || self.exited.is_some() {
            return;
        }
        let path = self.files.fifo_path();
        let prepared = if reusable {
            OutputFifo::reopen(path).or_else(|_| OutputFifo::create(path))
        } else {
            OutputFifo::create(path)
        };
        match prepared {
            Ok(fifo) => self.next_fifo = Some(fifo),
            Err(err) => tracing::debug!(%err, "could not prepare the next output pipe"),
        }
    }

    /// Counts the live processes in the group other than bash, off the
    /// actor's thread (it reads `/proc`, which is slow), and reports back.
    fn count_children(&self, myself: &ActorRef<ShellMsg>) {
        let group = self.group.group();
        let myself = myself.clone();
        tokio::task::spawn_blocking(move || {
            let shell_pid = group.as_raw();
            let others = group
                .live_members()
                .into_iter()
                .filter(|pid| *pid != shell_pid)
                .count();
            let _ = myself.cast(ShellMsg::ChildrenCounted(others));
        });
    }

    /// A released shell stops once nothing but bash is left in its group (seen
    /// by two scans [`ALONE_CONFIRM`] apart); until then (a `server &` its
    /// commands started) it stays, checking again after the poll interval.
    fn release_if_alone(&mut self, myself: &ActorRef<ShellMsg>, others: usize, grace: Duration) {
        let Some(poll) = self.retain_poll else {
            return;
        };
        if self.busy || self.killing.is_some() {
            return;
        }
        if others == 0 {
            self.alone_scans += 1;
            if self.alone_scans >= 2 {
                self.kill(myself, KillReason::Release, grace);
            } else {
                myself.send_after(ALONE_CONFIRM, || ShellMsg::CheckChildren);
            }
        } else {
            self.alone_scans = 0;
            tracing::debug!(
                others,
                "released shell kept alive for processes its commands left running"
            );
            myself.send_after(poll, || ShellMsg::CheckChildren);
        }
    }

    fn kill(&mut self, myself: &ActorRef<ShellMsg>, reason: KillReason, grace: Duration) {
        if self.killing.is_some() {
            return;
        }
        self.killing = Some(reason);
        for signal in [Signal::Term, Signal::Cont] {
            if let Err(err) = self.group.signal(signal) {
                tracing::warn!(%err, ?signal, "could not signal shell process group");
            }
        }
        self.escalation = Some(AbortOnDrop(myself.send_after(grace, || ShellMsg::Escalate)));
    }

    fn end_run(&mut self, end: RunEnd) {
        let _ = self.io.send(IoCommand::End(end));
    }

    /// The group is dead: stop guarding it and let the watcher reap the shell.
    fn finish(&mut self) {
        if let Err(err) = self.group.signal(Signal::Kill) {
            tracing::warn!(%err, "could not kill shell process group");
        }
        self.group.release();
        if let Some(reap) = self.reap.take() {
            let _ = reap.send(());
        }
        // Dropping the timer aborts it.
        self.escalation = None;
    }
}

/// Tells a Job its run was refused before anything ran.
fn refuse(reply_to: &DerivedActorRef<ShellEvent>, reason: &str) {
    let _ = reply_to.send_message(ShellEvent::Finished(Box::new(ExecOutcome {
        end: RunEnd::Refused {
            reason: reason.to_owned(),
        },
        output: None,
    })));
}
