//! The Job actor: one run of one command.
//!
//! Every run is a Job. It makes the feed of the run's output, which starts the
//! Job's Sink with the first byte (at once for a terminal or a watched
//! silence), sends the command
//! to the Shell it was given, enforces the deadline (asking the Shell to kill
//! its process group, with a watchdog in case the Shell never answers), turns
//! the Shell's report into a [`RunResult`](shellvisor_protocol::RunResult), and
//! answers the caller exactly once. A foreground caller's answer goes in
//! the notice that tells its Session the shell is free, and the Session
//! sends it ([`CallerAnswer`]), so a caller's next call always finds the
//! shell idle.
//! After finishing it stays alive for the retention period so its output can
//! still be read by offset.
//!
//! A run with `pty: true` has no Shell: the Job starts a PtySession (a child,
//! like its Sink) that runs the program on a pseudo-terminal; the Job forwards
//! interactive calls (input, keys, resize, screen) to it, and a foreground
//! run whose program waits for input answers its caller as a background job
//! (reason `awaiting_input`) with the screen, so the caller can type.
//!
//! A Job may touch only its own Sink and PtySession, the Shell it was lent,
//! and its Session's notice channel.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod actor;
mod answers;
mod background;
mod begin;
mod clock;
mod delivery;
mod info;
mod limits;
mod messages;
mod offer;
mod ready;
mod record;
mod result;
mod run;

pub use actor::Job;
pub use actor::JobArgs;
pub use actor::JobStart;
pub use actor::Runner;
pub use messages::CallerAnswer;
pub use messages::JobMsg;
pub use messages::JobNotice;
pub use messages::ShellRelease;
pub use offer::Offer;
pub use offer::StreamOffer;
pub use record::FinishedRun;
pub use record::JobRef;
