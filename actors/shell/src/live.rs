//! A started shell: its bash, files, I/O task and the kill in progress.

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use shellvisor_policy::ShellTraits;
use shellvisor_policy::may_change_environment;
use shellvisor_process::ChildProcess;
use shellvisor_process::CommandWriter;
use shellvisor_process::EnvRecord;
use shellvisor_process::ExitInfo;
use shellvisor_process::FifoPair;
use shellvisor_process::GroupGuard;
use shellvisor_process::PrivateDir;
use shellvisor_process::RunIdentity;
use shellvisor_process::RunStart;
use shellvisor_process::RunText;
use shellvisor_process::ShellFiles;
use shellvisor_process::ShellRecord;
use shellvisor_process::StatusReader;
use shellvisor_process::StatusRecord;
use shellvisor_process::StdinProbe;
use shellvisor_process::contain::SessionContainment;
use shellvisor_process::script::Confinement;
use shellvisor_process::script::WRAPPER_BUILTINS;
use shellvisor_process::spawn_shell;
use shellvisor_protocol::random_token;
use shellvisor_run::AbortOnDrop;
use shellvisor_run::Escalation;
use shellvisor_run::InitFailure;
use shellvisor_run::KillReason;
use shellvisor_run::RunEnd;
use shellvisor_run::RunNotice;
use shellvisor_run::RunReport;
use shellvisor_run::SessionInit;
use shellvisor_run::Timer;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::sync::watch;

use crate::actor::ShellArgs;
use crate::completion::Completions;
use crate::io::IoCommand;
use crate::io::RunIo;
use crate::io::ShellChannels;
use crate::io::io_task;
use crate::messages::ExecRequest;
use crate::messages::ShellMsg;
use crate::shell_output::ShellOutput;
use crate::source_names::SourceNames;

mod ending;

/// Random bytes in a run's nonce.
const NONCE_BYTES: usize = 10;
/// Random bytes in a shell's id (its runs' markers).
const SHELL_ID_BYTES: usize = 4;
/// How long a run waits for the previous run's environment record.
const ENV_RECORD_WAIT: Duration = Duration::from_secs(1);

/// A running bash and everything the Shell actor holds for it.
#[derive(Debug)]
pub(crate) struct LiveShell {
    kill_grace: Duration,
    /// How often a shell that is no longer used checks for the processes
    /// its commands left running.
    child_poll: Duration,
    group: GroupGuard,
    /// The session's cgroup or namespaces: where its processes are listed.
    containment: Option<SessionContainment>,
    files: ShellFiles,
    writer: CommandWriter,
    /// Names this shell in its runs' markers (not secret, unlike nonces).
    shell_id: String,
    /// The number of the last run started (the one in progress, if any).
    runs: u64,
    /// The runs' output FIFOs: one is made ready while bash runs the other's run.
    fifos: FifoPair,
    io: mpsc::UnboundedSender<IoCommand>,
    /// Where the I/O task leaves a run's completion (read by
    /// [`LiveShell::take_completion`]).
    completions: Completions,
    env: watch::Receiver<EnvRecord>,
    /// Nonce of the last run that reports its environment, until its record is in.
    env_pending: Option<String>,
    exit: watch::Receiver<Option<ExitInfo>>,
    reap: Option<oneshot::Sender<()>>,
    /// The run in progress: what identifies its processes. Cleared when its
    /// completion is taken or bash ends.
    run: Option<RunIdentity>,
    /// A command disabled a builtin the wrapper needs: no run is accepted.
    unusable: bool,
    /// Why the runtime killed the shell (its run, or the whole group).
    killed: Option<KillReason>,
    /// A run being killed: its processes get KILL when the grace elapses.
    run_kill: Option<RunKill>,
    /// The end of a killed run whose bash exited before what the run
    /// started: reported once that is gone too.
    held_end: Option<RunEnd>,
    /// The whole group is being stopped (TERM, grace, KILL).
    stopping: Option<Escalation<ShellMsg>>,
    /// Set once the shell is released (or its bash ended): how often to check
    /// for the processes its commands left running.
    retain_poll: Option<Duration>,
    /// Consecutive scans that found bash alone in its group.
    alone_scans: u8,
    /// While stopping, once bash has exited: consecutive scans that found
    /// nothing else left in its group.
    emptied_scans: u8,
    /// The status channel reached end of file; bash gets a moment to show it exited.
    status_closed: Option<Timer<ShellMsg>>,
    exited: Option<ExitInfo>,
    _watch_task: AbortOnDrop<()>,
    _dir: PrivateDir,
}

/// A run the runtime is killing.
#[derive(Debug)]
struct RunKill {
    identity: RunIdentity,
    /// `None` once the KILL pass has started.
    escalation: Option<Escalation<ShellMsg>>,
}

impl LiveShell {
    /// Spawns bash, writes its start-up script and waits until it reports
    /// ready, then runs the session's init. An init that hangs or ends the
    /// shell is abandoned: the shell is replaced by one without it.
    pub(crate) async fn start(
        myself: &ActorRef<ShellMsg>,
        args: ShellArgs,
    ) -> Result<LiveShell, ActorProcessingErr> {
        let mut init = args.init.clone().filter(|init| init.enabled());
        let booted = loop {
            match boot(&args, init.as_deref()).await? {
                Boot::Ready(booted) => break booted,
                Boot::InitAbandoned(reason) => {
                    if let Some(init) = init.take() {
                        report_init_failure(&args, &init, &InitFailure::Abandoned { reason });
                    }
                }
            }
        };
        let Booted {
            dir,
            files,
            group,
            mut child,
            probe,
            writer,
            shell_output,
            status,
            shell_id,
            env_nonce: nonce,
        } = *booted;
        let (env_tx, env_rx) = match args.env {
            Some(tx) => {
                let rx = tx.subscribe();
                (tx, rx)
            }
            None => watch::channel(EnvRecord::default()),
        };
        let (io, commands) = mpsc::unbounded_channel();
        let completions = Completions::default();
        // Not aborted with the actor: a run in progress always gets its report.
        tokio::spawn(io_task(
            ShellChannels {
                status,
                output: shell_output,
                probe,
                names: SourceNames::new(&files.script_paths()),
            },
            commands,
            myself.clone(),
            completions.clone(),
            env_tx,
        ));
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
            kill_grace: args.ctx.config.timeouts.kill_grace(),
            child_poll: Duration::from_millis(args.ctx.config.jobs.child_poll_ms.max(10)),
            group,
            containment: args.spawn.containment.clone(),
            files,
            writer,
            shell_id,
            runs: 0,
            fifos: FifoPair::new(dir.path()),
            io,
            completions,
            env: env_rx,
            env_pending: Some(nonce),
            exit: exit_rx,
            reap: Some(reap_tx),
            run: None,
            unusable: false,
            killed: None,
            run_kill: None,
            held_end: None,
            stopping: None,
            retain_poll: None,
            alone_scans: 0,
            emptied_scans: 0,
            status_closed: None,
            exited: None,
            _watch_task: AbortOnDrop(watch_task),
            _dir: dir,
        };
        live.prepare_fifo();
        Ok(live)
    }

    pub(crate) async fn exec(&mut self, request: ExecRequest) {
        tracing::trace!(target: "shellvisor::stage", "shell: exec received");
        self.take_completion();
        if self.exited.is_some()
            || self.unusable
            || self.killed.is_some()
            || self.stopping.is_some()
            || self.retain_poll.is_some()
        {
            return refuse(&request.reply_to, "the shell has ended");
        }
        if self.run.is_some() {
            return refuse(&request.reply_to, "the shell is already running a command");
        }
        let env_record = self.may_change_environment(&request.command).await;
        if let Some(disabled) = self.disabled_wrapper_builtins() {
            // The session retires this shell and lends the Job a fresh one.
            self.unusable = true;
            return refuse(
                &request.reply_to,
                &format!("the previous command disabled {disabled}, which the runtime needs"),
            );
        }
        self.runs += 1;
        // Random per run: a command that reads its own wrapper learns only
        // its own run's nonce, never the next one's.
        let nonce = match random_token(NONCE_BYTES) {
            Ok(nonce) => nonce,
            Err(err) => {
                return refuse(&request.reply_to, &format!("could not draw a nonce: {err}"));
            }
        };
        let marker = format!("{}.{}", self.shell_id, self.runs);
        let fifo = match self.fifos.take() {
            Ok(fifo) => fifo,
            Err(err) => {
                return refuse(
                    &request.reply_to,
                    &format!("could not create the output pipe: {err}"),
                );
            }
        };
        let written = self.files.write_run(
            &RunText {
                nonce: &nonce,
                marker: &marker,
                command: &request.command,
                cwd: request.cwd.as_deref(),
                env: &request.env,
                env_record,
                confinement: request.confinement.as_ref().map(|confinement| Confinement {
                    procs: &confinement.procs,
                    address_space_kib: confinement.address_space_kib,
                }),
            },
            self.fifos.taken_path(),
        );
        if let Err(err) = written {
            return refuse(
                &request.reply_to,
                &format!("could not write the command file: {err}"),
            );
        }
        tracing::trace!(target: "shellvisor::stage", "shell: files written");
        self.env_pending = env_record.then(|| nonce.clone());
        let start = IoCommand::Start(RunIo {
            run: self.runs,
            nonce,
            fifo,
            sink: request.sink,
            reply_to: request.reply_to,
            env_follows: env_record,
        });
        if let Err(mpsc::error::SendError(IoCommand::Start(io))) = self.io.send(start) {
            return refuse(&io.reply_to, "the shell's I/O stopped");
        }
        // Taken before bash can read the run line: nothing the run starts
        // is older than this.
        self.run = Some(RunIdentity {
            leader: self.group.group().as_raw(),
            start: RunStart::now(),
            marker,
        });
        tracing::trace!(target: "shellvisor::stage", "shell: fifo ready, pump spawned");
        if let Err(err) = self.writer.send(self.files.run_line()).await {
            // The shell is gone; its exit is reported by the watcher.
            tracing::debug!(%err, "writing to the shell failed");
        }
        // While bash runs this command, the other FIFO is made ready for the
        // next run.
        self.prepare_fifo();
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

    /// The builtins the wrapper needs that a command disabled (`enable -n .`),
    /// as the last environment record says, or `None`.
    fn disabled_wrapper_builtins(&self) -> Option<String> {
        let record = self.env.borrow();
        let disabled: Vec<String> = record
            .disabled
            .iter()
            .filter(|name| WRAPPER_BUILTINS.contains(&name.as_str()))
            .map(|name| format!("`{name}`"))
            .collect();
        (!disabled.is_empty()).then(|| disabled.join(", "))
    }

    /// Makes the next run's output FIFO ready (see [`FifoPair`]), unless
    /// bash has exited. A failure is retried when the run starts.
    fn prepare_fifo(&mut self) {
        if self.exited.is_some() {
            return;
        }
        if let Err(err) = self.fifos.prepare() {
            tracing::debug!(%err, "could not prepare the next output pipe");
        }
    }
}

/// Tells a Job its run was refused before anything ran.
pub(crate) fn refuse(reply_to: &DerivedActorRef<RunNotice>, reason: &str) {
    let _ = reply_to.send_message(RunNotice::Finished(Box::new(RunReport::refused(reason))));
}

/// A shell that reported ready (and ran the session's init, if any).
struct Booted {
    dir: PrivateDir,
    files: ShellFiles,
    group: GroupGuard,
    child: ChildProcess,
    probe: Option<StdinProbe>,
    writer: CommandWriter,
    shell_output: ShellOutput,
    status: StatusReader,
    shell_id: String,
    /// The nonce of the last records it wrote (its environment record
    /// follows).
    env_nonce: String,
}

enum Boot {
    Ready(Box<Booted>),
    /// The init hung or ended the shell; the shell is gone (its group killed
    /// as the parts were dropped).
    InitAbandoned(String),
}

/// Most bytes of an init's output quoted in its failure notice.
const INIT_OUTPUT_QUOTED: usize = 2048;

async fn boot(args: &ShellArgs, init: Option<&SessionInit>) -> Result<Boot, ActorProcessingErr> {
    tracing::trace!(target: "shellvisor::stage", "shell: starting");
    let dir = PrivateDir::create_unique(&args.parent_dir, "sh-")?;
    let files = ShellFiles::create(dir.path())?;
    let registry = Arc::clone(&args.ctx.registry);
    let spec = args.spawn.clone();
    let spawned = args
        .ctx
        .spawner
        .run(move || spawn_shell(&spec, &registry))
        .await
        .ok_or("the runtime is shutting down")??;
    tracing::trace!(target: "shellvisor::stage", "shell: bash spawned");
    let group = spawned.group;
    let mut child = spawned.child;
    // Without a probe (it cannot inspect the pipe), a shell whose wrapper
    // stops is found only by the run's deadline.
    let probe = StdinProbe::new(group.group().as_raw(), &spawned.stdin)
        .inspect_err(|err| tracing::debug!(%err, "no stdin probe for this shell"))
        .ok();
    let mut writer = CommandWriter::new(spawned.stdin)?;
    let shell_output = ShellOutput::new(spawned.output)?;
    let mut status = StatusReader::new(spawned.status)?;

    let shell_id = random_token(SHELL_ID_BYTES)?;
    let nonce = random_token(NONCE_BYTES)?;
    let init_line = files.write_init(&nonce, args.ctx.snapshot.as_deref(), init.is_none())?;
    // A shell that dies at once closes its stdin; the exit below says why.
    let _ = writer.send(&init_line).await;
    let startup = args.ctx.config.shell.startup_timeout();
    match next_record(&mut status, &mut child, &nonce, startup).await {
        Ok(_) => tracing::trace!(target: "shellvisor::stage", "shell: bash ready"),
        Err(Waited::Failed(reason)) => return Err(reason.into()),
        Err(Waited::Deadline) => {
            return Err(format!(
                "the shell did not become ready within {} ms",
                startup.as_millis()
            )
            .into());
        }
    }
    let mut env_nonce = nonce;
    if let Some(init) = init {
        let nonce = random_token(NONCE_BYTES)?;
        let line = files.write_session_init(init.text(), &nonce)?;
        let _ = writer.send(&line).await;
        match next_record(&mut status, &mut child, &nonce, init.timeout()).await {
            Ok(record) => {
                let output = files.take_init_output(INIT_OUTPUT_QUOTED);
                match record.exit_code {
                    Some(0) => {}
                    code => report_init_failure(
                        args,
                        init,
                        &InitFailure::Status {
                            status: code.unwrap_or(-1),
                            output,
                        },
                    ),
                }
            }
            Err(Waited::Deadline) => {
                return Ok(Boot::InitAbandoned(format!(
                    "it did not finish within {} ms",
                    init.timeout().as_millis()
                )));
            }
            Err(Waited::Failed(reason)) => return Ok(Boot::InitAbandoned(reason)),
        }
        env_nonce = nonce;
    }
    Ok(Boot::Ready(Box::new(Booted {
        dir,
        files,
        group,
        child,
        probe,
        writer,
        shell_output,
        status,
        shell_id,
        env_nonce,
    })))
}

enum Waited {
    Deadline,
    Failed(String),
}

/// The status record for `nonce`, within `deadline`, unless the shell dies.
async fn next_record(
    status: &mut StatusReader,
    child: &mut ChildProcess,
    nonce: &str,
    deadline: Duration,
) -> Result<StatusRecord, Waited> {
    let exited = |exit: std::io::Result<ExitInfo>| match exit {
        Ok(exit) => format!("the shell exited with status {}", exit.shell_status()),
        Err(err) => format!("could not watch the shell: {err}"),
    };
    let wait = async {
        tokio::select! {
            record = status.next() => match record {
                Ok(Some(ShellRecord::Status(record))) if record.nonce == nonce => Ok(record),
                Ok(Some(_)) => Err("the shell reported an unexpected status record".to_owned()),
                Ok(None) | Err(_) => Err(exited(child.exited().await)),
            },
            exit = child.exited() => Err(exited(exit)),
        }
    };
    match tokio::time::timeout(deadline, wait).await {
        Ok(result) => result.map_err(Waited::Failed),
        Err(_) => Err(Waited::Deadline),
    }
}

fn report_init_failure(args: &ShellArgs, init: &SessionInit, failure: &InitFailure) {
    tracing::debug!(session = init.session(), "the session's init failed");
    if let Some(notice) = init.failed(failure) {
        args.ctx
            .warnings
            .push(format!("session {}: {notice}", init.session()));
    }
}
