//! The Shell actor.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use ractor::MessagingErr;
use ractor::concurrency::JoinHandle;
use shellvisor_process::CommandWriter;
use shellvisor_process::ExitInfo;
use shellvisor_process::GroupGuard;
use shellvisor_process::OutputFifo;
use shellvisor_process::PrivateDir;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::ShellFiles;
use shellvisor_process::ShellSpawnSpec;
use shellvisor_process::Signal;
use shellvisor_process::Spawner;
use shellvisor_process::StatusReader;
use shellvisor_process::spawn_shell;
use shellvisor_protocol::random_token;
use tokio::sync::oneshot;
use tokio::sync::watch;

use crate::messages::ExecOutcome;
use crate::messages::ExecRequest;
use crate::messages::KillReason;
use crate::messages::RunEnd;
use crate::messages::ShellEvent;
use crate::messages::ShellMsg;
use crate::messages::ShellNotice;
use crate::pump::pump;
use crate::tasks::AbortOnDrop;

/// Random bytes in a run's nonce.
const NONCE_BYTES: usize = 10;

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
    run: Arc<Mutex<Option<RunSlot>>>,
    exit: watch::Receiver<Option<ExitInfo>>,
    reap: Option<oneshot::Sender<()>>,
    busy: bool,
    killing: Option<KillReason>,
    exited: Option<ExitInfo>,
    escalation: Option<JoinHandle<Result<(), MessagingErr<ShellMsg>>>>,
    _status_task: AbortOnDrop,
    _watch_task: AbortOnDrop,
    _dir: PrivateDir,
}

/// The run in progress: its nonce and where its end is reported.
#[derive(Debug)]
struct RunSlot {
    nonce: String,
    end: oneshot::Sender<RunEnd>,
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
                refuse(request, "the shell is not running");
            }
            return Ok(());
        };
        match message {
            ShellMsg::Exec(request) => live.exec(request).await,
            ShellMsg::Kill(reason) => live.kill(&myself, reason, grace),
            ShellMsg::RunCompleted => live.busy = false,
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
                    live.escalation = Some(myself.send_after(grace, || ShellMsg::Escalate));
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
    let dir = PrivateDir::create_unique(&args.parent_dir, "sh-")?;
    let files = ShellFiles::create(dir.path())?;
    let registry = Arc::clone(&args.registry);
    let spec = args.spawn.clone();
    let spawned = args
        .spawner
        .run(move || spawn_shell(&spec, &registry))
        .await
        .ok_or("the runtime is shutting down")??;
    let group = spawned.group;
    let mut child = spawned.child;
    let mut writer = CommandWriter::new(spawned.stdin)?;
    let mut status = StatusReader::new(spawned.status)?;

    let nonce = random_token(NONCE_BYTES)?;
    files.write_init(&nonce)?;
    // A shell that dies at once closes its stdin; the exit below says why.
    let _ = writer.send(files.source_line()).await;
    let ready = tokio::time::timeout(args.startup_timeout, async {
        tokio::select! {
            record = status.next() => match record {
                Ok(Some(record)) if record.nonce == nonce => Ok(()),
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
        Ok(Ok(())) => {}
        Ok(Err(reason)) => return Err(reason.into()),
        Err(_) => {
            return Err(format!(
                "the shell did not become ready within {} ms",
                args.startup_timeout.as_millis()
            )
            .into());
        }
    }

    let run: Arc<Mutex<Option<RunSlot>>> = Arc::new(Mutex::new(None));
    let status_task = {
        let run = Arc::clone(&run);
        let myself = myself.clone();
        tokio::spawn(async move {
            while let Ok(Some(record)) = status.next().await {
                let slot = lock(&run).take_if(|slot| slot.nonce == record.nonce);
                match slot {
                    Some(slot) => {
                        // Mark the shell idle before anyone can learn the run ended.
                        let _ = myself.cast(ShellMsg::RunCompleted);
                        let _ = slot.end.send(RunEnd::Completed(record));
                    }
                    None => tracing::warn!("status record for no run in progress; ignored"),
                }
            }
        })
    };
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
    Ok(LiveShell {
        group,
        files,
        writer,
        run,
        exit: exit_rx,
        reap: Some(reap_tx),
        busy: false,
        killing: None,
        exited: None,
        escalation: None,
        _status_task: AbortOnDrop(status_task),
        _watch_task: AbortOnDrop(watch_task),
        _dir: dir,
    })
}

impl LiveShell {
    async fn exec(&mut self, request: ExecRequest) {
        if self.exited.is_some() || self.killing.is_some() {
            return refuse(request, "the shell has ended");
        }
        if self.busy {
            return refuse(request, "the shell is already running a command");
        }
        let nonce = match random_token(NONCE_BYTES) {
            Ok(nonce) => nonce,
            Err(err) => return refuse(request, &format!("no random source: {err}")),
        };
        let written = self.files.write_run(
            &nonce,
            &request.command,
            request.cwd.as_deref(),
            &request.env,
        );
        if let Err(err) = written {
            return refuse(request, &format!("could not write the command file: {err}"));
        }
        let fifo = match OutputFifo::create(self.files.fifo_path()) {
            Ok(fifo) => fifo,
            Err(err) => {
                return refuse(request, &format!("could not create the output pipe: {err}"));
            }
        };
        let (end_tx, end_rx) = oneshot::channel();
        *lock(&self.run) = Some(RunSlot { nonce, end: end_tx });
        self.busy = true;
        tokio::spawn(pump(fifo, end_rx, request.sink, request.reply_to));
        if let Err(err) = self.writer.send(self.files.source_line()).await {
            // The shell is gone; its exit is reported by the watcher.
            tracing::debug!(%err, "writing to the shell failed");
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
        self.escalation = Some(myself.send_after(grace, || ShellMsg::Escalate));
    }

    fn end_run(&mut self, end: RunEnd) {
        if let Some(slot) = lock(&self.run).take() {
            let _ = slot.end.send(end);
        }
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
        if let Some(timer) = self.escalation.take() {
            timer.abort();
        }
    }
}

fn refuse(request: ExecRequest, reason: &str) {
    let _ = request
        .reply_to
        .send_message(ShellEvent::Finished(Box::new(ExecOutcome {
            end: RunEnd::Refused {
                reason: reason.to_owned(),
            },
            output: None,
        })));
}

/// Locks the run slot. A poisoned lock only means a panic elsewhere while it
/// was held; the slot's data (an Option) is still consistent, so recover it.
fn lock(run: &Mutex<Option<RunSlot>>) -> std::sync::MutexGuard<'_, Option<RunSlot>> {
    run.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
