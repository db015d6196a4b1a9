//! The root supervisor actor.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorId;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::SupervisionEvent;
use shellvisor_actor_session::Session;
use shellvisor_actor_session::SessionArgs;
use shellvisor_process::PrivateDir;
use shellvisor_protocol::Error;
use shellvisor_protocol::SessionId;
use shellvisor_protocol::SessionOptions;
use shellvisor_run::JobSlots;
use shellvisor_run::RuntimeContext;
use shellvisor_run::SessionInit;
use tokio::sync::broadcast;

use crate::messages::SessionEntry;
use crate::messages::SupervisorMsg;

/// Events buffered per session for slow subscribers (each at most one
/// streamed chunk, 64 KiB by default).
const SESSION_EVENT_CAPACITY: usize = 64;
/// How long closing a session may take.
const SESSION_STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// The root supervisor (see the crate documentation).
#[derive(Debug)]
pub struct Supervisor;

/// What the root supervisor needs.
#[derive(Clone, Debug)]
pub struct SupervisorArgs {
    /// The runtime (configuration, spawner, registry, containment, host
    /// extensions), shared with every actor below.
    pub ctx: Arc<RuntimeContext>,
    /// The runtime's private directory (sessions get subdirectories).
    pub runtime_dir: Arc<PrivateDir>,
    /// Where artifacts go (sessions get subdirectories).
    pub artifacts_dir: Arc<PrivateDir>,
    /// Running background jobs in the whole runtime (the runtime-wide cap
    /// counts against it).
    pub running_jobs: Arc<AtomicUsize>,
}

/// The root supervisor's state.
#[derive(Debug)]
pub struct SupervisorState {
    args: SupervisorArgs,
    sessions: HashMap<SessionId, SessionEntry>,
    by_actor: HashMap<ActorId, SessionId>,
    next_session: u64,
    shutting_down: bool,
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        Ok(SupervisorState {
            args,
            sessions: HashMap::new(),
            by_actor: HashMap::new(),
            next_session: 0,
            shutting_down: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        message: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            #[cfg(feature = "chaos")]
            SupervisorMsg::Panic => panic!("chaos: a panic injected into the root supervisor"),
            SupervisorMsg::OpenSession { id, options, reply } => {
                let _ = reply.send(state.open(&myself, id, options).await);
            }
            SupervisorMsg::CloseSession { id, reply } => {
                let entry = state.sessions.remove(&id);
                if let Some(entry) = &entry {
                    state.by_actor.remove(&entry.actor.get_id());
                }
                tokio::spawn(async move {
                    if let Some(entry) = entry {
                        let _ = entry
                            .actor
                            .stop_and_wait(
                                Some("session closed".to_owned()),
                                Some(SESSION_STOP_TIMEOUT),
                            )
                            .await;
                    }
                    let _ = reply.send(());
                });
            }
            SupervisorMsg::Shutdown(reply) => {
                state.shutting_down = true;
                let sessions: Vec<SessionEntry> =
                    state.sessions.drain().map(|(_, entry)| entry).collect();
                state.by_actor.clear();
                let mut stops = tokio::task::JoinSet::new();
                for entry in sessions {
                    stops.spawn(async move {
                        let _ = entry
                            .actor
                            .stop_and_wait(
                                Some("runtime shutdown".to_owned()),
                                Some(SESSION_STOP_TIMEOUT),
                            )
                            .await;
                    });
                }
                tokio::spawn(async move {
                    while stops.join_next().await.is_some() {}
                    let _ = reply.send(());
                });
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => state.forget(cell.get_id()),
            SupervisionEvent::ActorFailed(cell, err) => {
                tracing::error!(%err, "session failed; it is recreated on next use");
                state.forget(cell.get_id());
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}

impl SupervisorState {
    async fn open(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        id: SessionId,
        options: SessionOptions,
    ) -> shellvisor_protocol::Result<SessionEntry> {
        if self.shutting_down {
            return Err(Error::ShuttingDown);
        }
        if let Some(entry) = self.sessions.get(&id) {
            return Ok(entry.clone());
        }
        let limit = self.args.ctx.config.sessions.max_sessions.max(1);
        if self.sessions.len() >= limit {
            return Err(Error::SessionLimitReached { limit });
        }
        self.next_session += 1;
        let name = format!("s{}", self.next_session);
        let dir = self
            .args
            .runtime_dir
            .subdir(&name)
            .map_err(|err| Error::io("creating the session directory", &err))?;
        let artifacts_dir = self
            .args
            .artifacts_dir
            .subdir(&name)
            .map_err(|err| Error::io("creating the session artifacts directory", &err))?;
        let (events, _) = broadcast::channel(SESSION_EVENT_CAPACITY);
        let ctx = &self.args.ctx;
        let jobs = &ctx.config.jobs;
        let slots = JobSlots::new(
            Arc::new(AtomicUsize::new(0)),
            jobs.max_running_per_session,
            Arc::clone(&self.args.running_jobs),
            jobs.max_running,
        );
        // Creating a cgroup or namespaces is blocking work (mkdir, a fork).
        let containment = {
            let ctx = Arc::clone(ctx);
            tokio::task::spawn_blocking(move || ctx.containment.session_containment(&name))
                .await
                .unwrap_or_default()
        };
        let args = SessionArgs {
            ctx: Arc::clone(&self.args.ctx),
            id: id.clone(),
            dir,
            artifacts_dir,
            artifacts: ctx
                .artifacts
                .for_session(ctx.config.output.max_artifact_bytes_per_session),
            events: events.clone(),
            slots: slots.clone(),
            containment,
            init: options
                .init
                .or_else(|| ctx.config.shell.init.clone())
                .filter(|text| !text.trim().is_empty())
                .map(|text| {
                    Arc::new(SessionInit::new(
                        id.to_string(),
                        text,
                        ctx.config.shell.init_timeout(),
                    ))
                }),
        };
        let (actor, _) = Actor::spawn_linked(None, Session, args, myself.get_cell())
            .await
            .map_err(|err| Error::Spawn {
                what: "session".to_owned(),
                message: err.to_string(),
            })?;
        let entry = SessionEntry {
            actor,
            events,
            slots,
        };
        self.by_actor.insert(entry.actor.get_id(), id.clone());
        self.sessions.insert(id, entry.clone());
        Ok(entry)
    }

    fn forget(&mut self, actor: ActorId) {
        if let Some(id) = self.by_actor.remove(&actor) {
            self.sessions.remove(&id);
        }
    }
}
