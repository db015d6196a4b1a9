//! How a shell's runs and the shell itself end: the kill contract.
//!
//! - A run the runtime kills (deadline, cancel) loses exactly what it
//!   started ([`RunIdentity`]) and the bash it ran in: TERM and CONT, KILL
//!   after the grace period. Processes earlier runs left running stay; the
//!   run is reported killed whatever a trap makes the wrapper write.
//! - A shell whose bash ended (an `exit`, a kill, a broken channel) stays
//!   while processes its commands left running (`server &`) are alive, and
//!   stops when they are gone; closing the session ([`LiveShell::stop`])
//!   ends everything.
//! - A status channel that closes while bash still runs, or carries
//!   anything but this shell's records, ends the run at once (the I/O task
//!   reports it) and the shell is given up.

use std::time::Duration;

use ractor::ActorRef;
use shellvisor_process::ExitInfo;
use shellvisor_process::RunIdentity;
use shellvisor_process::RunStart;
use shellvisor_process::Signal;
use shellvisor_run::AbortOnDrop;
use shellvisor_run::Escalation;
use shellvisor_run::KillReason;
use shellvisor_run::RunEnd;
use tokio::sync::oneshot;

use super::LiveShell;
use super::RunKill;
use crate::io::IoCommand;
use crate::messages::ShellMsg;

/// How long after a scan that found bash alone a released shell looks again
/// before stopping. A scan of `/proc` is not atomic: a child that forks and
/// exits while the scan runs (a daemon's double fork) can hide its grandchild,
/// which would die with the group before it leaves it.
const ALONE_CONFIRM: Duration = Duration::from_millis(50);
/// How long the status channel's end of file may precede the report of
/// bash's exit before the channel counts as broken.
const STATUS_CLOSED_GRACE: Duration = Duration::from_millis(100);
/// How long the I/O task may take to say whether the run is still open.
const KILL_ACK_DEADLINE: Duration = Duration::from_secs(10);
/// How often a killed run whose bash has exited is checked for processes
/// still alive.
const RUN_GONE_POLL: Duration = Duration::from_millis(5);
/// How long the KILL pass of a run may rescan for its processes.
const KILL_ALL_DEADLINE: Duration = Duration::from_secs(1);

impl LiveShell {
    /// Whether a run is in progress.
    pub(crate) fn is_busy(&mut self) -> bool {
        self.take_completion();
        self.run.is_some()
    }

    /// Whether the runtime killed (or is killing) this shell.
    pub(crate) fn killed_by_runtime(&self) -> bool {
        self.killed.is_some()
    }

    /// Takes the I/O task's word that the run in progress completed (see
    /// [`crate::completion`]): the shell is idle then, and the run's FIFO
    /// goes back to the pair, to be made ready while the next run runs.
    /// Called before anything that asks whether a run is in progress.
    pub(crate) fn take_completion(&mut self) {
        let Some(completed) = self.completions.take() else {
            return;
        };
        // Every `Exec` takes the completion before its run is numbered, so
        // one for an earlier run has nothing to say (and its FIFO goes).
        if completed.run != self.runs {
            return;
        }
        self.run = None;
        if let Some(fifo) = completed.drained_fifo {
            self.fifos.give_back(fifo);
        }
    }

    /// The runtime kills the current run (its deadline, a cancel): what the
    /// run started, and bash. Nothing happens if the run has completed
    /// already (its report is on its way to the Job).
    pub(crate) async fn kill_run(&mut self, myself: &ActorRef<ShellMsg>, reason: KillReason) {
        self.take_completion();
        if self.killed.is_some() || self.stopping.is_some() {
            return;
        }
        let Some(identity) = self.run.clone() else {
            return;
        };
        let (ack, answer) = oneshot::channel();
        if self.io.send(IoCommand::Kill(ack)).is_err() {
            return;
        }
        match tokio::time::timeout(KILL_ACK_DEADLINE, answer).await {
            Ok(Ok(false)) => return,
            Ok(Ok(true)) => {}
            // The I/O task is gone or stuck: kill anyway.
            Ok(Err(_)) | Err(_) => {}
        }
        self.begin_run_kill(myself, reason, identity);
    }

    /// TERM and CONT to the run's processes and bash; KILL after the grace.
    fn begin_run_kill(
        &mut self,
        myself: &ActorRef<ShellMsg>,
        reason: KillReason,
        identity: RunIdentity,
    ) {
        self.killed = Some(reason);
        let escalation = Escalation::begin(reason, &identity, myself, self.kill_grace, || {
            ShellMsg::EscalateRun
        });
        self.run_kill = Some(RunKill {
            identity,
            escalation: Some(escalation),
        });
    }

    /// The run kill's grace passed: KILL what is left of the run (rescanning
    /// until none is left), then report [`ShellMsg::RunKilled`].
    pub(crate) fn run_grace_elapsed(&mut self, myself: &ActorRef<ShellMsg>) {
        let Some(kill) = self.run_kill.as_mut() else {
            return;
        };
        let Some(mut escalation) = kill.escalation.take() else {
            return;
        };
        escalation.settle();
        let identity = kill.identity.clone();
        let myself = myself.clone();
        tokio::task::spawn_blocking(move || {
            if !identity.kill_all(KILL_ALL_DEADLINE) {
                tracing::warn!("processes of a killed run outlived SIGKILL");
            }
            let _ = myself.cast(ShellMsg::RunKilled);
        });
    }

    /// The run being killed is gone (its processes ended, or the KILL pass
    /// is done): a run end held for it is reported now.
    pub(crate) fn run_killed(&mut self) {
        self.run_kill = None;
        if let Some(end) = self.held_end.take() {
            self.end_run(end);
        }
    }

    /// bash exited: the run in progress, if any, ends (killed, if the
    /// runtime did it). Processes the shell's commands left running stay;
    /// the shell stops once they are gone, unless it is being stopped.
    ///
    /// During a run kill, bash usually dies first (it is signalled first):
    /// the run ends only once what it started is gone too, so a kill that
    /// returns has ended the whole run (at most the grace period later, when
    /// the KILL pass takes what TERM did not).
    pub(crate) fn exited(&mut self, myself: &ActorRef<ShellMsg>, info: ExitInfo) {
        self.exited = Some(info);
        // After `exited`: the run is over either way, and no FIFO is
        // prepared for a shell that is gone.
        self.take_completion();
        self.run = None;
        self.status_closed = None;
        let end = RunEnd::ShellExited {
            exit: info,
            killed: self.killed,
        };
        match &self.run_kill {
            Some(kill) => {
                self.held_end = Some(end);
                let identity = kill.identity.clone();
                let grace = self.kill_grace;
                let myself = myself.clone();
                tokio::task::spawn_blocking(move || {
                    // What bash forked between the TERM scan and its death
                    // (a kill right at the run's start) missed that TERM.
                    identity.signal(Signal::Term);
                    identity.signal(Signal::Cont);
                    let until = shellvisor_protocol::deadline_after(grace);
                    while std::time::Instant::now() < until {
                        if identity.live_processes().is_empty() {
                            let _ = myself.cast(ShellMsg::RunKilled);
                            return;
                        }
                        std::thread::sleep(RUN_GONE_POLL);
                    }
                    // The KILL pass after the grace ends it.
                });
            }
            None => self.end_run(end),
        }
        if self.stopping.is_none() {
            self.linger(myself, self.child_poll);
        } else {
            self.watch_for_an_empty_group(myself);
        }
    }

    /// The shell is no longer needed: it stops once the processes its
    /// commands left running (`server &`) are gone, checking every `poll`.
    pub(crate) fn release(&mut self, myself: &ActorRef<ShellMsg>, poll: Duration) {
        self.linger(myself, poll);
    }

    fn linger(&mut self, myself: &ActorRef<ShellMsg>, poll: Duration) {
        if self.retain_poll.is_none() {
            self.retain_poll = Some(poll);
            self.count_children(myself, ShellMsg::ChildrenCounted);
        }
    }

    /// Counts the live processes in the group other than bash, off the
    /// actor's thread (it reads `/proc`, which is slow), and reports back
    /// as `report(count)`.
    pub(crate) fn count_children(
        &self,
        myself: &ActorRef<ShellMsg>,
        report: fn(usize) -> ShellMsg,
    ) {
        let group = self.group.group();
        let containment = self.containment.clone();
        let myself = myself.clone();
        tokio::task::spawn_blocking(move || {
            let shell_pid = group.as_raw();
            let others = group
                .live_members_in(containment.as_ref())
                .into_iter()
                .filter(|pid| *pid != shell_pid)
                .count();
            let _ = myself.cast(report(others));
        });
    }

    /// Answers whether processes other than bash live in the group, off the
    /// actor's thread.
    pub(crate) fn report_occupied(&self, reply: ractor::RpcReplyPort<bool>) {
        let group = self.group.group();
        let containment = self.containment.clone();
        tokio::task::spawn_blocking(move || {
            let shell_pid = group.as_raw();
            let occupied = group
                .live_members_in(containment.as_ref())
                .into_iter()
                .any(|pid| pid != shell_pid);
            let _ = reply.send(occupied);
        });
    }

    /// A released shell stops once nothing but bash is left in its group
    /// (seen by two scans [`ALONE_CONFIRM`] apart) and no kill of a run is
    /// under way; until then it checks again after the poll interval.
    /// Returns whether the actor stops now.
    pub(crate) fn release_if_alone(&mut self, myself: &ActorRef<ShellMsg>, others: usize) -> bool {
        let Some(poll) = self.retain_poll else {
            return false;
        };
        if self.stopping.is_some() {
            return false;
        }
        self.take_completion();
        if self.run.is_some() || self.run_kill.is_some() {
            myself.send_after(ALONE_CONFIRM, || ShellMsg::CheckChildren);
            return false;
        }
        if others > 0 {
            self.alone_scans = 0;
            tracing::debug!(others, "shell kept for processes its commands left running");
            myself.send_after(poll, || ShellMsg::CheckChildren);
            return false;
        }
        self.alone_scans += 1;
        if self.alone_scans < 2 {
            myself.send_after(ALONE_CONFIRM, || ShellMsg::CheckChildren);
            return false;
        }
        if self.exited.is_some() {
            self.finish();
            return true;
        }
        self.stop(myself, KillReason::Release)
    }

    /// Ends the shell and everything in its group: TERM and CONT, KILL after
    /// the grace (then the actor stops). Returns `false`: the actor goes on
    /// until the grace has passed.
    pub(crate) fn stop(&mut self, myself: &ActorRef<ShellMsg>, reason: KillReason) -> bool {
        if self.stopping.is_some() {
            return false;
        }
        self.killed.get_or_insert(reason);
        self.stopping = Some(Escalation::begin(
            reason,
            &self.group,
            myself,
            self.kill_grace,
            || ShellMsg::Escalate,
        ));
        if self.exited.is_some() {
            self.watch_for_an_empty_group(myself);
        }
        false
    }

    /// The shell is being stopped and bash is gone: look for what else is
    /// left in the group. Once nothing is (two scans [`ALONE_CONFIRM`]
    /// apart, as for a release), the shell is over without waiting out the
    /// grace: a released shell counts against the session's shell limit
    /// until its actor stops, and its KILL would reach nobody.
    fn watch_for_an_empty_group(&mut self, myself: &ActorRef<ShellMsg>) {
        self.emptied_scans = 0;
        self.count_children(myself, ShellMsg::StoppedGroupCounted);
    }

    /// A scan of a stopping shell's group found `others` processes besides
    /// bash (which has exited). Returns whether the actor stops now.
    pub(crate) fn stopped_group_counted(
        &mut self,
        myself: &ActorRef<ShellMsg>,
        others: usize,
    ) -> bool {
        if self.stopping.is_none() || self.exited.is_none() || self.run_kill.is_some() {
            return false;
        }
        if others > 0 {
            // They got TERM; the grace's KILL takes what is left.
            return false;
        }
        self.emptied_scans += 1;
        if self.emptied_scans < 2 {
            myself.send_after(ALONE_CONFIRM, || ShellMsg::CheckStoppedGroup);
            return false;
        }
        self.finish();
        true
    }

    /// The stop's grace period passed: SIGKILL to the group. Returns whether
    /// the shell is over (bash has exited; the actor stops).
    pub(crate) fn grace_elapsed(&mut self, myself: &ActorRef<ShellMsg>) -> bool {
        let Some(stopping) = self.stopping.as_mut() else {
            return false;
        };
        stopping.grace_elapsed(&self.group);
        if self.exited.is_some() {
            self.finish();
            return true;
        }
        // KILL was sent; the exit watcher reports shortly.
        stopping.rearm(myself);
        false
    }

    /// The I/O task found the status channel broken (and ended the run in
    /// progress): the shell is given up, with the run's processes.
    pub(crate) fn channel_broken(&mut self, myself: &ActorRef<ShellMsg>) {
        self.take_completion();
        if self.killed.is_some() || self.exited.is_some() {
            return;
        }
        let leader = self.group.group().as_raw();
        let identity = self.run.take().unwrap_or_else(|| RunIdentity {
            leader,
            start: RunStart::now(),
            marker: String::new(),
        });
        self.begin_run_kill(myself, KillReason::ChannelBroken, identity);
    }

    /// The status channel reached end of file: if bash does not turn out to
    /// have exited within a moment, it runs on without its channel.
    pub(crate) fn status_closed(&mut self, myself: &ActorRef<ShellMsg>) {
        if self.exited.is_none() {
            self.status_closed =
                Some(AbortOnDrop(myself.send_after(STATUS_CLOSED_GRACE, || {
                    ShellMsg::StatusClosedGrace
                })));
        }
    }

    /// bash still runs without its status channel (it `exec`'d another
    /// program): the run ends now and the shell is given up.
    pub(crate) fn status_closed_grace(&mut self, myself: &ActorRef<ShellMsg>) {
        self.status_closed = None;
        if self.exited.is_some() || self.killed.is_some() {
            return;
        }
        self.end_run(RunEnd::ShellLost {
            reason: "the shell's status channel closed while the shell still ran (it was replaced by another program, for example with `exec`); the shell is replaced".to_owned(),
        });
        self.channel_broken(myself);
    }

    /// A graceful stop (the actor is stopping): TERM and CONT, up to the
    /// grace period for bash to exit, then KILL to what is left.
    pub(crate) async fn stop_gracefully(&mut self) {
        if self.exited.is_none() {
            let _ = self.group.signal(Signal::Term);
            let _ = self.group.signal(Signal::Cont);
            let mut exit = self.exit.clone();
            let _ = tokio::time::timeout(self.kill_grace, exit.wait_for(Option::is_some)).await;
        }
        self.finish();
    }

    pub(crate) fn end_run(&mut self, end: RunEnd) {
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
        if let Some(stopping) = self.stopping.as_mut() {
            stopping.settle();
        }
    }
}
