//! Messages of the root supervisor.

use ractor::ActorRef;
use ractor::RpcReplyPort;
use shellvisor_actor_session::SessionMsg;
use shellvisor_protocol::Result;
use shellvisor_protocol::SessionEvent;
use shellvisor_protocol::SessionId;
use shellvisor_protocol::SessionOptions;
use shellvisor_run::JobSlots;
use tokio::sync::broadcast;

/// Messages accepted by [`crate::Supervisor`].
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Open (or find) a session.
    OpenSession {
        /// Its id.
        id: SessionId,
        /// How it is set up if this creates it.
        options: SessionOptions,
        /// Where its entry goes.
        reply: RpcReplyPort<Result<SessionEntry>>,
    },
    /// Close a session and wait until its processes are gone.
    CloseSession {
        /// Its id.
        id: SessionId,
        /// Answered once it is closed.
        reply: RpcReplyPort<()>,
    },
    /// Close every session, refuse new ones, and answer once all are closed.
    Shutdown(RpcReplyPort<()>),
    /// Fault injection for tests (feature `chaos`): the handler panics, as
    /// a bug would.
    #[cfg(feature = "chaos")]
    Panic,
}

/// A live session: its actor and its event channel.
#[derive(Clone, Debug)]
pub struct SessionEntry {
    /// The Session actor.
    pub actor: ActorRef<SessionMsg>,
    /// Its events (subscribe with `events.subscribe()`).
    pub events: broadcast::Sender<SessionEvent>,
    /// Its running-job slots (to read the running count).
    pub slots: JobSlots,
}
