//! The Shell actor: its arguments, its state and its message dispatch.

use std::path::PathBuf;
use std::sync::Arc;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::DerivedActorRef;
use shellvisor_process::EnvRecord;
use shellvisor_process::ShellSpawnSpec;
use shellvisor_run::RuntimeContext;
use shellvisor_run::SessionInit;
use tokio::sync::watch;

use crate::live::LiveShell;
use crate::live::refuse;
use crate::messages::ShellMsg;
use crate::messages::ShellNotice;

/// The Shell actor (see the crate documentation).
#[derive(Debug)]
pub struct Shell;

/// What a Shell needs to start.
#[derive(Debug)]
pub struct ShellArgs {
    /// The runtime (its spawner thread, registry and configuration).
    pub ctx: Arc<RuntimeContext>,
    /// Program, environment and initial directory.
    pub spawn: ShellSpawnSpec,
    /// The session's private directory; the shell makes its own inside it.
    pub parent_dir: PathBuf,
    /// Where the shell's death is reported at once.
    pub notify: Option<DerivedActorRef<ShellNotice>>,
    /// Where the exported environment after each run is published (the
    /// Session keeps a receiver for its primary shell; `None` for a shell
    /// nobody seeds from).
    pub env: Option<watch::Sender<EnvRecord>>,
    /// The session's init, run before the first command (`None`: none, or
    /// the session gave up on it).
    pub init: Option<Arc<SessionInit>>,
}

/// A Shell's state. Field order matters: the process group guard is dropped
/// (SIGKILL to the group) before anything else, so a killed actor never
/// leaves processes behind.
#[derive(Debug)]
pub struct ShellState {
    live: Option<LiveShell>,
    start: Option<ShellArgs>,
    notify: Option<DerivedActorRef<ShellNotice>>,
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
        state.live = Some(LiveShell::start(&myself, args).await?);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ShellMsg>,
        message: ShellMsg,
        state: &mut ShellState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(live) = state.live.as_mut() else {
            if let ShellMsg::Exec(request) = message {
                refuse(&request.reply_to, "the shell is not running");
            }
            return Ok(());
        };
        match message {
            #[cfg(feature = "chaos")]
            ShellMsg::Panic => panic!("chaos: a panic injected into a Shell handler"),
            ShellMsg::Exec(request) => live.exec(request).await,
            ShellMsg::KillRun(reason) => live.kill_run(&myself, reason).await,
            ShellMsg::Stop(reason) => {
                if live.stop(&myself, reason) {
                    myself.stop(Some("shell ended".to_owned()));
                }
            }
            ShellMsg::Release { poll } => live.release(&myself, poll),
            ShellMsg::CheckChildren => live.count_children(&myself, ShellMsg::ChildrenCounted),
            ShellMsg::CheckStoppedGroup => {
                live.count_children(&myself, ShellMsg::StoppedGroupCounted);
            }
            ShellMsg::StoppedGroupCounted(others) => {
                if live.stopped_group_counted(&myself, others) {
                    myself.stop(Some("shell ended".to_owned()));
                }
            }
            ShellMsg::Occupied(reply) => live.report_occupied(reply),
            ShellMsg::ChildrenCounted(others) => {
                if live.release_if_alone(&myself, others) {
                    myself.stop(Some("shell ended".to_owned()));
                }
            }
            ShellMsg::ChannelBroken => live.channel_broken(&myself),
            ShellMsg::StatusClosed => live.status_closed(&myself),
            ShellMsg::StatusClosedGrace => live.status_closed_grace(&myself),
            ShellMsg::Exited(exit) => {
                // The Session hears of it before the run's Job does.
                if let Some(notify) = &state.notify {
                    let _ = notify.send_message(ShellNotice::Ended {
                        shell: myself.get_id(),
                        exit,
                        during_run: live.is_busy(),
                        killed: live.killed_by_runtime(),
                    });
                }
                live.exited(&myself, exit);
            }
            ShellMsg::Escalate => {
                if live.grace_elapsed(&myself) {
                    myself.stop(Some("shell ended".to_owned()));
                }
            }
            ShellMsg::EscalateRun => live.run_grace_elapsed(&myself),
            ShellMsg::RunKilled => live.run_killed(),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ShellMsg>,
        state: &mut ShellState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(live) = state.live.as_mut() {
            live.stop_gracefully().await;
        }
        Ok(())
    }
}
