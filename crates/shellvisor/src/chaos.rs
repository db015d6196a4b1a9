//! Fault injection for tests (feature `chaos`): find the runtime's actors by
//! kind and kill them the hard way (ractor `kill()`, which skips `post_stop`),
//! as a crash would, or make them panic inside a handler, as a bug would.

use ractor::ActorCell;
use shellvisor_actor_job::JobMsg;
use shellvisor_actor_pty::PtyMsg;
use shellvisor_actor_session::SessionMsg;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_actor_sink::SinkMsg;

use crate::Runtime;

/// The kinds of actor the runtime runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActorKind {
    /// A session.
    Session,
    /// A shell (primary, isolated or detached).
    Shell,
    /// A run.
    Job,
    /// A run's output buffer.
    Sink,
    /// A run on a pseudo-terminal.
    PtySession,
}

/// A live actor of the runtime.
#[derive(Clone, Debug)]
pub struct ActorHandle {
    kind: ActorKind,
    cell: ActorCell,
}

impl ActorHandle {
    /// Its kind.
    pub fn kind(&self) -> ActorKind {
        self.kind
    }

    /// Kills it at once: no `post_stop`, its children die with it.
    pub fn kill(&self) {
        self.cell.kill();
    }

    /// Makes it panic inside a message handler, as a bug would: ractor
    /// reports the failure to its supervisor (no `post_stop`; its state,
    /// with its guards, is dropped).
    pub fn panic(&self) {
        let _ = match self.kind {
            ActorKind::Session => self.cell.send_message(SessionMsg::Panic).map_err(drop),
            ActorKind::Shell => self.cell.send_message(ShellMsg::Panic).map_err(drop),
            ActorKind::Job => self.cell.send_message(JobMsg::Panic).map_err(drop),
            ActorKind::Sink => self.cell.send_message(SinkMsg::Panic).map_err(drop),
            ActorKind::PtySession => self.cell.send_message(PtyMsg::Panic).map_err(drop),
        };
    }
}

fn kind_of(cell: &ActorCell) -> Option<ActorKind> {
    let is = |found: Option<bool>| found == Some(true);
    if is(cell.is_message_type_of::<SessionMsg>()) {
        Some(ActorKind::Session)
    } else if is(cell.is_message_type_of::<ShellMsg>()) {
        Some(ActorKind::Shell)
    } else if is(cell.is_message_type_of::<JobMsg>()) {
        Some(ActorKind::Job)
    } else if is(cell.is_message_type_of::<SinkMsg>()) {
        Some(ActorKind::Sink)
    } else if is(cell.is_message_type_of::<PtyMsg>()) {
        Some(ActorKind::PtySession)
    } else {
        None
    }
}

impl Runtime {
    /// Makes the root supervisor panic inside a handler, as a bug would;
    /// the next call that needs it starts another.
    pub fn panic_root_supervisor(&self) {
        let _ = self
            .inner
            .root_cell()
            .send_message(shellvisor_actor_supervisor::SupervisorMsg::Panic);
    }

    /// Every live actor under the root supervisor, with its kind.
    pub fn actors(&self) -> Vec<ActorHandle> {
        let mut found = Vec::new();
        let mut pending = self.inner.root_cell().get_children();
        while let Some(cell) = pending.pop() {
            pending.extend(cell.get_children());
            if let Some(kind) = kind_of(&cell) {
                found.push(ActorHandle { kind, cell });
            }
        }
        found
    }
}
