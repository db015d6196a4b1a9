//! The Shell actor: one `bash --noprofile --norc` process.
//!
//! A Shell runs one command at a time for whoever sends [`ShellMsg::Exec`] (a
//! Job), streams the command's output into that Job's Sink, and reports how the
//! run ended as a [`RunNotice`](shellvisor_run::RunNotice). It owns the process group of its bash: when
//! the shell exits (`exit`, `exec`, a signal), is killed (a timeout), or the
//! actor itself is stopped or killed, the whole group is killed (TERM, CONT,
//! then KILL after the grace period) and the actor stops. Its supervisor (the
//! Session) decides whether to start another.
//!
//! A Shell may touch only its own process group, its private directory, the
//! Sink it is given for a run, and the Job it reports to.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod actor;
mod completion;
mod io;
mod live;
mod messages;
mod shell_output;
mod source_names;

pub use actor::Shell;
pub use actor::ShellArgs;
pub use messages::ExecRequest;
pub use messages::RunConfinement;
pub use messages::ShellMsg;
pub use messages::ShellNotice;
